#include "hwmodels/cost_model.h"

namespace servesim::hwmodels {

CostModelRegistry& cost_model_registry() {
  static CostModelRegistry r("cost_models", "step cost models: iteration shape -> time, FLOPs, bytes");
  return r;
}

}  // namespace servesim::hwmodels

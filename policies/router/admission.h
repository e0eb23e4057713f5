#pragma once
// Admission control at the router ([admission], family "admission"; docs/fleet.md): after the router
// has picked a replica, a kind decides whether the request may join it or is shed (outcome
// rejected_admission). The interface is sim::Admission (sim/cluster/cluster.h); the kinds live in
// admission.cc. Load shedding by class: each class is shed once the load reaches its
// admit_fraction of the limit ([[workload.classes]]), so a class with a smaller fraction is shed
// first and one with 1 only at the limit itself.

#include "sim/cluster/cluster.h"
#include "sim/core/params.h"

namespace servesim::policies {

// Family "admission". No factory arguments.
using AdmissionRegistry = core::Registry<sim::Admission>;
AdmissionRegistry& admission_registry();

// The prefill rate predicted TTFT is costed at (admission predicted_ttft, autoscaler slo): the GPU
// time of a chunk_tokens prefill alone on `replica`, per token, in ms. An internal error unless it
// is a positive finite time.
double prefill_ms_per_token(const sim::Replica& replica, int64_t chunk_tokens);

}  // namespace servesim::policies

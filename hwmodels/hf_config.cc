#include "hwmodels/hf_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>
#include <set>
#include <optional>

#include "sim/core/error.h"
#include "sim/core/input_file.h"
#include "sim/core/format.h"

namespace servesim::hwmodels {

namespace {

using nlohmann::json;

// config.json files are a few kilobytes and a couple of levels deep; anything far beyond is not one.
constexpr size_t kMaxConfigBytes = size_t{16} << 20;
constexpr int kMaxNesting = 64;

class Reader {
 public:
  Reader(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    throw core::InputError(source_, line_of(field), field, message);
  }

  // The line of the first "field" key in the text: config.json files are flat enough that this is
  // where a person should look.
  int64_t line_of(const std::string& field) const {
    std::string leaf = field.substr(field.rfind('.') == std::string::npos ? 0 : field.rfind('.') + 1);
    leaf = leaf.substr(0, leaf.find('['));  // "layer_types[3]": the list's line
    const size_t at = text_.find("\"" + leaf + "\"");
    if (leaf.empty() || at == std::string_view::npos) return 0;
    return 1 + static_cast<int64_t>(std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  }

  json parse() const {
    if (text_.size() > kMaxConfigBytes) fail("", "larger than 16 MiB: not a model config.json");
    check_nesting();
    try {
      json j = json::parse(text_.begin(), text_.end());
      if (!j.is_object()) {
        // The line where the value that is not an object starts.
        const size_t start = text_.find_first_not_of(" \t\r\n");
        throw core::InputError(source_, line_at(start == std::string_view::npos ? 0 : start), "",
                               "a config.json holds one JSON object, got " + std::string(j.type_name()));
      }
      return j;
    } catch (const json::parse_error& e) {
      const size_t byte = std::min(e.byte, text_.size());
      throw core::InputError(source_, line_at(byte), "", "malformed JSON: " + short_reason(e.what()));
    } catch (const json::exception& e) {
      // nlohmann gives no position for these (a number too large for a double): find the number.
      const std::string token = quoted_token(e.what());
      const size_t at = token.empty() ? std::string::npos : text_.find(token);
      throw core::InputError(source_, at == std::string::npos ? 0 : line_at(at), "",
                             "malformed JSON: " + short_reason(e.what()));
    }
  }

  int64_t line_at(size_t byte) const {
    return 1 + static_cast<int64_t>(std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(byte), '\n'));
  }
  // nlohmann's message up to "; last read: ..." (which quotes the input, every newline spelled out,
  // and can run to thousands of characters), at most 200 characters.
  static std::string short_reason(const std::string& what) {
    std::string out = what.substr(0, what.find("; last read"));
    if (out.size() > 200) out = out.substr(0, 200) + "...";
    return out;
  }
  // The text between the last pair of single quotes in nlohmann's message ("... parsing '1e400'").
  static std::string quoted_token(const std::string& what) {
    const size_t end = what.rfind('\'');
    if (end == std::string::npos || end == 0) return {};
    const size_t begin = what.rfind('\'', end - 1);
    return begin == std::string::npos ? std::string() : what.substr(begin + 1, end - begin - 1);
  }

  // A non-negative integer field; nullopt when absent or null and `required` is false.
  std::optional<int64_t> integer(const json& obj, const std::string& field, bool required, int64_t lo,
                                 int64_t hi, const std::string& prefix = "") const {
    const std::string name = prefix + field;
    const auto it = obj.find(field);
    if (it == obj.end() || it->is_null()) {
      if (required) fail(name, "missing; a " + model_type_ + " config.json must give it");
      return std::nullopt;
    }
    double v = 0;
    if (it->is_number_integer()) {
      v = static_cast<double>(it->get<int64_t>());
    } else if (it->is_number_unsigned()) {
      v = static_cast<double>(it->get<uint64_t>());
    } else if (it->is_number_float() && std::isfinite(it->get<double>()) &&
               it->get<double>() == std::floor(it->get<double>())) {
      v = it->get<double>();
    } else {
      fail(name, "expected an integer, got " + it->dump());
    }
    if (v < static_cast<double>(lo) || v > static_cast<double>(hi))
      fail(name, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                     it->dump());
    return static_cast<int64_t>(v);
  }

  int64_t required(const json& obj, const std::string& field, int64_t lo = 1, int64_t hi = kMaxModelDim) const {
    return *integer(obj, field, true, lo, hi);
  }

  bool boolean(const json& obj, const std::string& field, bool fallback) const {
    const auto it = obj.find(field);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(field, "expected true or false, got " + it->dump());
    return it->get<bool>();
  }

  std::string string(const json& obj, const std::string& field, const std::string& fallback,
                     const std::string& prefix = "") const {
    const auto it = obj.find(field);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_string()) fail(prefix + field, "expected a string, got " + it->dump());
    return it->get<std::string>();
  }

  void set_model_type(std::string t) { model_type_ = std::move(t); }

 private:
  // Nesting depth, and keys given twice in one object: nlohmann::json keeps the last silently, the
  // Mooncake reader refuses them; a config.json that says two things about one field is refused too.
  void check_nesting() const {
    int depth = 0;
    bool in_string = false, escaped = false;
    size_t string_start = 0;
    std::vector<std::optional<std::set<std::string>>> scopes;  // per open bracket: an object's keys, or none
    for (size_t i = 0; i < text_.size(); ++i) {
      const char c = text_[i];
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
          const size_t next = text_.find_first_not_of(" \t\r\n", i + 1);
          if (next != std::string_view::npos && text_[next] == ':' && !scopes.empty() && scopes.back()) {
            const std::string key(text_.substr(string_start + 1, i - string_start - 1));
            if (!scopes.back()->insert(key).second)
              throw core::InputError(source_, line_at(string_start), core::printable(key, 80),
                                     "duplicate key: a JSON object gives each key once (which value would count "
                                     "is a guess)");
          }
        }
      } else if (c == '"') {
        in_string = true;
        string_start = i;
      } else if (c == '{' || c == '[') {
        if (++depth > kMaxNesting)
          throw core::InputError(source_, line_at(i), "", "nested deeper than 64 levels: not a model config.json");
        scopes.push_back(c == '{' ? std::optional<std::set<std::string>>(std::set<std::string>{}) : std::nullopt);
      } else if (c == '}' || c == ']') {
        --depth;
        if (!scopes.empty()) scopes.pop_back();
      }
    }
  }

  std::string_view text_;
  std::string source_;
  std::string model_type_ = "model";
};

// The checkpoint's storage of the blocks' linear layers.
DType weight_dtype_of(const Reader& r, const json& config, DType unquantised) {
  const auto it = config.find("quantization_config");
  if (it == config.end() || it->is_null()) return unquantised;
  if (!it->is_object()) r.fail("quantization_config", "expected an object, got " + it->dump());
  const std::string method = core::to_lower(r.string(*it, "quant_method", "", "quantization_config."));
  if (method == "fp8" || method == "fbgemm_fp8") return DType::kFp8;
  if (method == "mxfp4") return DType::kMxfp4;
  if (method == "modelopt" || method == "modelopt_fp4") {
    const std::string algo = core::to_lower(r.string(*it, "quant_algo", "", "quantization_config."));
    if (algo == "nvfp4" || method == "modelopt_fp4") return DType::kNvfp4;
    if (algo == "fp8") return DType::kFp8;
    r.fail("quantization_config.quant_algo", "modelopt algorithm '" + algo + "' is not modelled (nvfp4, fp8)");
  }
  if (method == "gptq" || method == "awq" || method == "marlin" || method == "gptq_marlin" || method == "awq_marlin") {
    const int64_t bits = *r.integer(*it, "bits", true, 1, 64, "quantization_config.");
    if (bits == 4) return DType::kInt4;
    if (bits == 8) return DType::kInt8;
    r.fail("quantization_config.bits", method + " with " + std::to_string(bits) +
                                           " bits is not modelled (4 or 8); set [model] weight_dtype to override");
  }
  r.fail("quantization_config.quant_method",
         "quantisation method '" + method +
             "' is not modelled (fp8, gptq, awq, mxfp4, modelopt nvfp4); set [model] weight_dtype to say how the "
             "weights are stored");
}

// Whether the checkpoint leaves the attention layers unquantised (modules_to_not_convert naming
// them, as gpt-oss's mxfp4 checkpoints do): then only the experts are stored quantised.
bool attention_not_converted(const Reader& r, const json& config) {
  const auto q = config.find("quantization_config");
  if (q == config.end() || !q->is_object()) return false;
  const auto it = q->find("modules_to_not_convert");
  if (it == q->end() || it->is_null()) return false;
  if (!it->is_array())
    r.fail("quantization_config.modules_to_not_convert", "expected a list of module names, got " + it->dump());
  for (const json& name : *it) {
    if (!name.is_string())
      r.fail("quantization_config.modules_to_not_convert", "expected module names (strings), got " + name.dump());
    if (name.get<std::string>().find("attn") != std::string::npos) return true;
  }
  return false;
}

// The letter of ModelSpec::attention_pattern for one of config.json's layer_types.
char layer_letter(const std::string& type) {
  if (type == "full_attention" || type == "attention") return 'F';
  if (type == "sliding_attention" || type == "sliding_window_attention") return 'S';
  if (type == "linear_attention" || type == "mamba" || type == "mamba2") return 'L';
  return 0;
}

// The shortest cycle that repeats to `letters` (so a 36-layer alternation reads "SF").
std::string shortest_cycle(const std::string& letters) {
  const size_t n = letters.size();
  for (size_t p = 1; p < n; ++p) {
    if (n % p != 0) continue;
    bool repeats = true;
    for (size_t i = p; i < n && repeats; ++i) repeats = letters[i] == letters[i - p];
    if (repeats) return letters.substr(0, p);
  }
  return letters;
}

// config.json's "layer_types": one entry per layer; "" when absent.
std::string layer_types_of(const Reader& r, const json& config, int64_t layers) {
  const auto it = config.find("layer_types");
  if (it == config.end() || it->is_null()) return "";
  if (!it->is_array()) r.fail("layer_types", "expected a list with one attention type per layer, got " + it->dump());
  if (static_cast<int64_t>(it->size()) != layers)
    r.fail("layer_types", std::to_string(it->size()) + " entries for num_hidden_layers = " + std::to_string(layers) +
                              ": one attention type per layer");
  std::string letters;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const char c = t.is_string() ? layer_letter(core::to_lower(t.get<std::string>())) : 0;
    if (c == 0)
      r.fail("layer_types[" + std::to_string(i) + "]",
             "attention type " + t.dump() +
                 " is not modelled (full_attention, sliding_attention, linear_attention)");
    letters += c;
  }
  return shortest_cycle(letters);
}

// Qwen3-Next: a MoE block on every layer (512 experts and a shared one of the same width), gated
// full attention, and Gated DeltaNet layers.
void parse_qwen3_next(const Reader& r, const json& config, ModelSpec& m) {
  m.num_experts = r.required(config, "num_experts", 1, kMaxModelCount);
  m.experts_per_token = r.required(config, "num_experts_per_tok", 1, kMaxModelCount);
  m.moe_intermediate_size = r.required(config, "moe_intermediate_size");
  const int64_t shared = r.integer(config, "shared_expert_intermediate_size", false, 0, kMaxModelDim).value_or(0);
  if (shared > 0) {
    if (shared % m.moe_intermediate_size != 0)
      r.fail("shared_expert_intermediate_size", "a shared expert of width " + std::to_string(shared) +
                                                    " is not a whole number of experts of moe_intermediate_size " +
                                                    std::to_string(m.moe_intermediate_size));
    m.num_shared_experts = shared / m.moe_intermediate_size;
  }
  if (r.integer(config, "decoder_sparse_step", false, 1, kMaxModelCount).value_or(1) != 1)
    r.fail("decoder_sparse_step", "MoE blocks interleaved with dense ones (decoder_sparse_step > 1) are not modelled");
  if (const auto it = config.find("mlp_only_layers"); it != config.end() && !it->is_null()) {
    if (!it->is_array()) r.fail("mlp_only_layers", "expected a list of layer indices, got " + it->dump());
    if (!it->empty()) r.fail("mlp_only_layers", "dense-MLP layers among the MoE ones are not modelled");
  }
  m.attn_output_gate = r.boolean(config, "attn_output_gate", true);
  m.linear_num_key_heads = r.required(config, "linear_num_key_heads");
  m.linear_num_value_heads = r.required(config, "linear_num_value_heads");
  m.linear_key_head_dim = r.required(config, "linear_key_head_dim");
  m.linear_value_head_dim = r.required(config, "linear_value_head_dim");
  m.linear_conv_kernel = r.required(config, "linear_conv_kernel_dim");
  // The recurrent state: mamba_ssm_dtype when given (Qwen3.5 keeps it in fp32), else the model's.
  const std::string state = r.string(config, "mamba_ssm_dtype", std::string(dtype_name(m.kv_dtype)));
  const std::optional<DType> state_dtype = parse_dtype(state);
  if (!state_dtype || is_quantized(*state_dtype))
    r.fail("mamba_ssm_dtype", "expected float32, bfloat16 or float16, got '" + state + "'");
  m.state_dtype = *state_dtype;
  m.state_bytes = dtype_bytes(*state_dtype);
}

}  // namespace

const std::vector<std::string>& hf_model_types() {
  static const std::vector<std::string> types = {"llama",       "mistral",      "qwen2",   "qwen3",     "mixtral",
                                                 "deepseek_v2", "deepseek_v3", "deepseek_v32", "gpt_oss", "qwen3_next"};
  return types;
}

ModelSpec parse_hf_config(std::string_view json_text, const std::string& source_name, const std::string& name,
                          bool weight_dtype_given) {
  Reader r(json_text, source_name);
  const json config = r.parse();
  const std::string type = core::to_lower(r.string(config, "model_type", ""));
  const auto& types = hf_model_types();
  const std::string supported = core::join(types);
  if (type.empty()) r.fail("model_type", "missing; supported: " + supported);
  if (std::find(types.begin(), types.end(), type) == types.end())
    r.fail("model_type", "model_type " + core::in_quotes(type) + " is not supported; supported: " + supported +
                             " (a Llama-like model can be described with a preset and overrides instead)");
  r.set_model_type(type);

  ModelSpec m;
  m.name = name.empty() ? r.string(config, "_name_or_path", source_name) : name;
  m.num_layers = r.required(config, "num_hidden_layers", 1, kMaxModelCount);
  m.hidden_size = r.required(config, "hidden_size");
  m.num_heads = r.required(config, "num_attention_heads");
  m.num_kv_heads = r.integer(config, "num_key_value_heads", false, 1, kMaxModelDim).value_or(m.num_heads);
  m.vocab_size = r.required(config, "vocab_size");
  m.max_context = r.required(config, "max_position_embeddings", 1, int64_t{1} << 32);
  // gpt-oss's MLP is all experts: its intermediate_size is one expert's width, like Mixtral's.
  m.intermediate_size = r.required(config, "intermediate_size");
  m.tied_embeddings = r.boolean(config, "tie_word_embeddings", false);
  const std::string act = core::to_lower(r.string(config, "hidden_act", "silu"));
  if (act != "silu" && act != "swish" && act != "gelu" && act != "gelu_pytorch_tanh")
    r.fail("hidden_act", "activation '" + act + "' is not modelled (silu, gelu)");
  m.gated_mlp = true;  // every supported family gates its MLP (SwiGLU / GeGLU)

  const std::string torch_dtype = r.string(config, "torch_dtype", "bfloat16");
  const std::optional<DType> dtype = parse_dtype(torch_dtype);
  if (!dtype || is_quantized(*dtype))
    r.fail("torch_dtype", "expected float16, bfloat16 or float32, got '" + torch_dtype + "'");
  m.activation_bytes = dtype_bytes(*dtype);
  m.kv_dtype = *dtype;
  m.kv_bytes = dtype_bytes(*dtype);
  m.weight_dtype = weight_dtype_given ? *dtype : weight_dtype_of(r, config, *dtype);
  m.weight_bytes = dtype_bytes(m.weight_dtype);
  // Attention left unquantised (gpt-oss: attention, router, embeddings stay 16-bit): in a MoE model
  // only the experts are quantised (applied below, once the experts are known).
  const bool experts_apart = !weight_dtype_given && is_quantized(m.weight_dtype) && attention_not_converted(r, config);

  if (type == "deepseek_v2" || type == "deepseek_v3" || type == "deepseek_v32") {
    m.kv_lora_rank = r.required(config, "kv_lora_rank");
    m.q_lora_rank = r.integer(config, "q_lora_rank", false, 1, kMaxModelDim).value_or(0);
    m.qk_rope_head_dim = r.required(config, "qk_rope_head_dim");
    m.head_dim = r.required(config, "qk_nope_head_dim");
    m.v_head_dim = r.required(config, "v_head_dim");
    m.num_experts = r.integer(config, "n_routed_experts", false, 1, kMaxModelCount).value_or(0);
    if (m.num_experts > 0) {
      m.experts_per_token = r.required(config, "num_experts_per_tok", 1, kMaxModelCount);
      m.moe_intermediate_size = r.required(config, "moe_intermediate_size");
      m.num_shared_experts = r.integer(config, "n_shared_experts", false, 0, kMaxModelCount).value_or(0);
      m.dense_layers = r.integer(config, "first_k_dense_replace", false, 0, kMaxModelCount).value_or(0);
      const int64_t freq = r.integer(config, "moe_layer_freq", false, 1, kMaxModelCount).value_or(1);
      if (freq != 1) r.fail("moe_layer_freq", "MoE blocks interleaved with dense ones (moe_layer_freq > 1) are not modelled");
    }
    if (type == "deepseek_v32") {
      // DeepSeek sparse attention on every layer.
      m.attention_pattern = "D";
      m.index_topk = r.required(config, "index_topk", 1, int64_t{1} << 32);
      m.index_n_heads = r.required(config, "index_n_heads");
      m.index_head_dim = r.required(config, "index_head_dim");
    }
  } else {
    m.head_dim = r.integer(config, "head_dim", false, 1, kMaxModelDim).value_or(0);
    if (m.head_dim == 0) {
      if (m.hidden_size % m.num_heads != 0)
        r.fail("num_attention_heads", "hidden_size " + std::to_string(m.hidden_size) + " is not a multiple of the " +
                                          std::to_string(m.num_heads) + " heads and head_dim is not given");
      m.head_dim = m.hidden_size / m.num_heads;
    }
    m.qkv_bias = type == "qwen2" || r.boolean(config, "attention_bias", false);
    if (type == "mixtral" || type == "gpt_oss") {
      m.num_experts = r.required(config, "num_local_experts", 1, kMaxModelCount);
      m.experts_per_token = r.required(config, "num_experts_per_tok", 1, kMaxModelCount);
      m.moe_intermediate_size = m.intermediate_size;  // intermediate_size is one expert's width
    }
    if (type == "qwen3_next") parse_qwen3_next(r, config, m);
    m.attention_pattern = layer_types_of(r, config, m.num_layers);
    if (type == "qwen3_next" && m.attention_pattern.empty()) {
      // Every full_attention_interval-th layer is full attention, the others Gated DeltaNet.
      const int64_t interval = r.required(config, "full_attention_interval", 1, m.num_layers);
      m.attention_pattern = std::string(static_cast<size_t>(interval - 1), 'L') + "F";
    }
    if (type == "gpt_oss" && m.attention_pattern.empty())
      r.fail("layer_types", "missing; a gpt_oss config.json lists each layer's attention type");
    if ((type == "qwen2" || type == "qwen3") && r.boolean(config, "use_sliding_window", false))
      r.fail("use_sliding_window", "Qwen's sliding window on the upper layers (max_window_layers) is not modelled");
    const bool window_everywhere = (type == "mistral" || type == "mixtral") && m.attention_pattern.empty();
    if (m.attention_pattern.find('S') != std::string::npos || window_everywhere) {
      const std::optional<int64_t> window = r.integer(config, "sliding_window", false, 1, int64_t{1} << 32);
      if (window) {
        m.sliding_window = *window;
        if (window_everywhere) m.attention_pattern.assign(1, 'S');  // Mistral-7B-v0.1: every layer slides
      } else if (!window_everywhere) {
        r.fail("sliding_window", "missing; layer_types has sliding_attention layers");
      }
    }
    if (m.attention_pattern.find_first_not_of('F') == std::string::npos) m.attention_pattern.clear();
  }

  if (experts_apart && m.is_moe()) {
    m.expert_weight_dtype = m.weight_dtype;
    m.weight_dtype = *dtype;
    m.weight_bytes = dtype_bytes(*dtype);
  }

  // Multi-token-prediction modules (DeepSeek-V3, and models that copy its config key).
  m.mtp_layers = r.integer(config, "num_nextn_predict_layers", false, 0, kMaxModelCount).value_or(0);

  if (const std::string problem = model_problem(m); !problem.empty()) {
    static const std::pair<const char*, const char*> hf_names[] = {
        {"num_kv_heads", "num_key_value_heads"}, {"experts_per_token", "num_experts_per_tok"},
        {"dense_layers", "first_k_dense_replace"}, {"num_experts", "n_routed_experts"},
        {"kv_lora_rank", "kv_lora_rank"},        {"qk_rope_head_dim", "qk_rope_head_dim"},
        {"moe_intermediate_size", "moe_intermediate_size"}, {"linear_conv_kernel", "linear_conv_kernel_dim"},
        {"attention_pattern", "layer_types"}};
    const std::string field = problem.substr(0, problem.find(':'));
    std::string hf_field = field;
    for (const auto& [ours, theirs] : hf_names)
      if (field == ours) hf_field = theirs;
    r.fail(hf_field, problem.substr(field.size() + 2));
  }
  return m;
}

ModelSpec read_hf_config(const std::string& path, bool weight_dtype_given) {
  const std::string text =
      core::read_input_file(path, "the Hugging Face config.json of a model", kMaxConfigBytes);
  const std::filesystem::path p(path);
  std::string name = p.filename() == "config.json" && p.has_parent_path() ? p.parent_path().filename().string()
                                                                          : p.stem().string();
  if (name.empty() || name == "." || name == "..") name = p.stem().string();
  return parse_hf_config(text, path, name, weight_dtype_given);
}

ModelSpec model_by_name_or_file(const std::string& arg, const std::string& option) {
  std::error_code ec;
  const bool json = arg.size() > 5 && arg.compare(arg.size() - 5, 5, ".json") == 0;
  if (json || std::filesystem::is_regular_file(arg, ec)) return read_hf_config(arg);
  if (const ModelSpec* preset = find_model_preset(arg)) return *preset;
  std::string valid;
  for (const auto& name : model_registry().kind_names())
    if (name != "hf_config") valid += (valid.empty() ? "" : ", ") + name;
  throw core::ConfigError({option, 0, 0}, option.substr(option.find_first_not_of('-')),
                          "unknown model '" + arg + "': give a preset (" + valid + ") or a Hugging Face config.json");
}

namespace {

std::vector<core::ParamSpec> hf_config_param_specs() {
  std::vector<core::ParamSpec> specs = {
      core::ParamSpec::path("path", "the model's Hugging Face config.json (llama, mistral, qwen2, mixtral, "
                                    "deepseek_v2/v3/v32, gpt_oss, qwen3_next); relative to this configuration file"),
  };
  ModelSpec none;
  for (core::ParamSpec spec : model_param_specs(none)) {
    spec.description += " (overrides config.json)";
    specs.push_back(spec.optional());
  }
  return specs;
}

[[maybe_unused]] const bool kRegistered = model_registry().add(
    {"hf_config",
     "a model read from a Hugging Face config.json (`path`): Llama, Mistral, Qwen2, Mixtral (MoE), DeepSeek-V2/V3 "
     "(MLA, MoE with shared experts), DeepSeek-V3.2 (sparse attention), gpt-oss (sliding-window and full layers, "
     "mxfp4 experts), Qwen3-Next (Gated DeltaNet and full layers); any architecture field given here overrides the "
     "file",
     hf_config_param_specs()},
    [](const core::Params& p) {
      return std::make_unique<ModelSpec>(
          model_from_params(p, read_hf_config(p.readable_file("path", "a model config.json", kMaxConfigBytes),
                                              p.has("weight_dtype"))));
    });

}  // namespace

}  // namespace servesim::hwmodels

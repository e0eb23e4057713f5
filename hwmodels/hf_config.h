#pragma once
// Models from a Hugging Face config.json: Llama, Mistral, Qwen2, Qwen3 (dense, GQA), Mixtral (MoE),
// DeepSeek-V2/V3 (MLA + MoE with shared experts), and per-layer attention types: gpt-oss
// (layer_types: sliding_attention / full_attention, sliding_window; mxfp4 experts), Qwen3-Next
// (full_attention_interval or layer_types, linear_* Gated DeltaNet fields) and DeepSeek-V3.2
// (index_topk, index_n_heads, index_head_dim). The [model] kind "hf_config" reads one (`path`),
// and any architecture field written beside it overrides the file.

#include <string>
#include <string_view>

#include "hwmodels/model_spec.h"

namespace servesim::hwmodels {

// The model_type values parse_hf_config understands.
const std::vector<std::string>& hf_model_types();

// Parses the text of a config.json. `source_name` names the file in errors; `name` is the model's
// name (empty: the "_name_or_path" field, else `source_name`). Throws core::InputError (naming the
// file, the line of the field and the field) on malformed JSON, a missing or mistyped field, an
// unsupported model_type or quantisation method, or an inconsistent architecture; nothing else.
// When `weight_dtype_given` is true the checkpoint's quantization_config is not interpreted (the
// caller sets the weight type itself). The fuzz entry point for this reader.
ModelSpec parse_hf_config(std::string_view json_text, const std::string& source_name,
                          const std::string& name = "", bool weight_dtype_given = false);

// Reads and parses the file at `path` (core::InputError when it cannot be read). The model is named
// after the file's directory when the file is called config.json, else after the file.
ModelSpec read_hf_config(const std::string& path, bool weight_dtype_given = false);

// A command-line model argument: a preset name (case ignored), or the path of a config.json (an
// argument ending in .json or naming an existing file). core::ConfigError naming `option` and
// listing the presets for anything else.
ModelSpec model_by_name_or_file(const std::string& arg, const std::string& option = "--model");

}  // namespace servesim::hwmodels

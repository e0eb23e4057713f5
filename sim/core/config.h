#pragma once
// Loading a TOML configuration and validating it against declared parameters.

#include <string>
#include <vector>

#include "sim/core/params.h"

namespace servesim::core {

// Parses `file`, applies `overrides` ("section.key=value", TOML value syntax; a bare word is taken
// as a string), and validates the result against `schema`: unknown keys and kinds, wrong types and
// out-of-range values are ConfigErrors naming file:line:column, the key and what is valid.
Params load_config(const std::string& file, const std::vector<ParamSpec>& schema,
                   const std::vector<std::string>& overrides = {});

// The same for text already in memory; `source_name` stands in for the file name in messages and
// relative paths resolve against `base_dir`.
Params parse_config(const std::string& text, const std::string& source_name,
                    const std::vector<ParamSpec>& schema,
                    const std::vector<std::string>& overrides = {}, const std::string& base_dir = ".");

}  // namespace servesim::core

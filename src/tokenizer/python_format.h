// Python-compatible text formatting for chat templates. The upstream chat
// templates (K3's, Qwen3's) are Jinja run by Python, so every value that reaches the prompt is
// formatted the way Python would format it (str.strip, bool(), repr(float),
// str(), json.dumps). The renderer must reproduce that output byte for byte,
// because the model was trained on it; these helpers are the Python semantics
// it relies on, and nothing more.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deltafin {

// Python's str.strip(): drops leading and trailing str.isspace() characters.
// Invalid UTF-8 bytes count as U+FFFD (not whitespace), so they are never
// stripped.
std::string_view python_strip(std::string_view s);

// python_strip(s) is empty: Jinja's `s | trim` is falsy.
bool python_is_blank(std::string_view s);

// Python's bool(x) for a JSON value: null, false, 0, 0.0, "", [] and {} are
// false; everything else (NaN included) is true.
bool python_truthy(const nlohmann::ordered_json& v);

// Python's repr(float): shortest round-trip digits, fixed notation for
// 1e-4 <= |x| < 1e16 (integral values keep ".0"), else d.ddde±XX; "nan",
// "inf", "-inf".
std::string python_float_repr(double x);

// Python's str(x) for a scalar: what Jinja prints for `{{ x }}` ("True",
// "None", "1.5", strings as they are). Arrays and objects throw
// deltafin::Error naming `field`.
std::string python_str(const nlohmann::ordered_json& v, std::string_view field);

// json.dumps(v, ensure_ascii=False, separators=(item_separator,
// key_separator), sort_keys=sort_keys). Strings escape only '"', '\\' and C0
// controls; non-ASCII and invalid UTF-8 bytes pass through unchanged. Floats
// use python_float_repr; NaN and infinities are NaN / Infinity / -Infinity.
struct PythonJsonStyle {
  std::string_view item_separator;
  std::string_view key_separator;
  bool sort_keys;
};

// json.dumps(v, separators=(",", ":"), sort_keys=True).
inline constexpr PythonJsonStyle kJsonCompactSorted{",", ":", true};
// json.dumps(v) with default separators, keys in the given order: Jinja's tojson.
inline constexpr PythonJsonStyle kJsonPythonDefault{", ", ": ", false};

std::string python_json_dumps(const nlohmann::ordered_json& v, const PythonJsonStyle& style);

}  // namespace deltafin

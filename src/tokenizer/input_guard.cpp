#include "tokenizer/input_guard.h"

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace deltafin {

namespace {

// Python's _split_whitespaces_or_nonwhitespaces over one slice: count the
// current run of same-class characters; when it would reach max_run + 1,
// cut before the character and start counting again from 1. The cut keeps
// everything since the previous cut, so a slice may hold many runs.
void split_runs(std::string_view slice, size_t max_run, std::vector<std::string_view>& out) {
  size_t slice_start = 0, run_length = 0, pos = 0;
  bool run_is_space = false;
  bool first = true;
  while (pos < slice.size()) {
    size_t char_start = pos;
    bool is_space = is_python_space(utf8_next(slice, &pos));
    if (first) {  // Python starts with the class of s[0] and a count of 0
      run_is_space = is_space;
      first = false;
    }
    if (is_space != run_is_space) {
      run_is_space = is_space;
      run_length = 1;
    } else if (++run_length > max_run) {
      out.push_back(slice.substr(slice_start, char_start - slice_start));
      slice_start = char_start;
      run_length = 1;
    }
  }
  if (slice_start < slice.size()) out.push_back(slice.substr(slice_start));
}

}  // namespace

std::vector<std::string_view> split_long_input(std::string_view text, size_t max_slice_scalars, size_t max_run) {
  if (max_slice_scalars == 0 || max_run == 0) fail("split_long_input: limits must be positive");
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    for (size_t count = 0; count < max_slice_scalars && pos < text.size(); ++count) utf8_next(text, &pos);
    split_runs(text.substr(start, pos - start), max_run, out);
  }
  return out;
}

}  // namespace deltafin

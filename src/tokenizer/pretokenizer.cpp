#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace deltafin {

const char* const kK3Pattern =
    R"([\p{Han}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";

namespace {

// Largest JIT stack a match may grow to. The K3 pattern repeats a group
// ((?:(?!\p{Han})[...])*) once per letter, and the long-input guard lets a
// letter run reach 25,000 characters; measured use for that is well under
// 1 MiB, so 64 MiB is ample headroom and is only reserved, not touched.
constexpr size_t kJitStackStart = 32 * 1024;
constexpr size_t kJitStackMax = 64 * 1024 * 1024;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return cat("PCRE2 error ", code);
  return reinterpret_cast<const char*>(buffer);
}

// Per-thread match context with a JIT stack: pcre2_match itself is
// thread-safe on shared compiled code, but a JIT stack may be used by one
// thread at a time.
class ThreadMatchContext {
public:
  ThreadMatchContext() {
    context_ = pcre2_match_context_create(nullptr);
    if (!context_) fail("PCRE2: out of memory creating a match context");
    stack_ = pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr);
    if (stack_) pcre2_jit_stack_assign(context_, nullptr, stack_);
  }
  ~ThreadMatchContext() {
    if (stack_) pcre2_jit_stack_free(stack_);
    pcre2_match_context_free(context_);
  }
  ThreadMatchContext(const ThreadMatchContext&) = delete;
  ThreadMatchContext& operator=(const ThreadMatchContext&) = delete;
  pcre2_match_context* get() const { return context_; }

private:
  pcre2_match_context* context_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
};

pcre2_match_context* thread_match_context() {
  thread_local ThreadMatchContext context;
  return context.get();
}

}  // namespace

struct Pretokenizer::Compiled {
  std::string translated;
  pcre2_code* code = nullptr;
  Compiled() = default;
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

Pretokenizer::Pretokenizer(std::string pattern) : pattern_(std::move(pattern)) {
  auto compiled = std::make_shared<Compiled>();
  compiled->translated = translate_to_pcre2(pattern_);

  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  if (!cctx) fail("PCRE2: out of memory creating a compile context");
  // Rust's `.` excludes only \n, and its `$` matches only at the very end:
  // newline = LF and DOLLAR_ENDONLY give PCRE2 the same meaning.
  pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled->translated.data()),
                                 compiled->translated.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY,
                                 &error, &offset, cctx);
  pcre2_compile_context_free(cctx);
  if (!compiled->code)
    fail("pre-tokenizer pattern \"", pattern_, "\" does not compile (translated: \"", compiled->translated,
         "\", at offset ", offset, "): ", pcre2_message(error));
  // JIT is an optimisation only: without it (unsupported platform) the
  // interpreter gives the same matches.
  pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
  compiled_ = std::move(compiled);
}

const std::string& Pretokenizer::pcre2_pattern() const { return compiled_->translated; }

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const { return scan(text, false); }

std::vector<std::string_view> Pretokenizer::split_isolated(std::string_view text) const { return scan(text, true); }

std::vector<std::string_view> Pretokenizer::scan(std::string_view text, bool keep_gaps) const {
  // Validate once here, then match with NO_UTF_CHECK: PCRE2 would otherwise
  // re-check the rest of the subject at every match, which is quadratic.
  require_valid_utf8(text, "pre-tokenizer input");
  std::vector<std::string_view> pieces;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(compiled_->code, nullptr);
  if (!md) fail("PCRE2: out of memory creating match data");
  pcre2_match_context* mctx = thread_match_context();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  size_t kept = 0;  // end of the last piece (match or gap) handed out
  while (offset < text.size()) {
    int rc = pcre2_match(compiled_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, md, mctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      fail("pre-tokenizer pattern \"", pattern_, "\": matching failed at byte offset ", offset, " of a ",
           text.size(), "-byte text: ", pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t start = ov[0], end = ov[1];
    if (end == start) {
      // An empty match yields no piece; step over one character so the scan
      // moves on (Rust's find_iter does the same).
      size_t next = start;
      if (next >= text.size()) break;
      utf8_next(text, &next);
      offset = next;
      continue;
    }
    if (keep_gaps && start > kept) pieces.push_back(text.substr(kept, start - kept));
    pieces.push_back(text.substr(start, end - start));
    offset = kept = end;
  }
  if (keep_gaps && kept < text.size()) pieces.push_back(text.substr(kept));
  pcre2_match_data_free(md);
  return pieces;
}

}  // namespace deltafin

#include "model/common/causal_model.h"

#include "util/error.h"

namespace deltafin {

void throw_wrong_family_session(const char* family) {
  fail(family, " model: the session belongs to another model family");
}

}  // namespace deltafin

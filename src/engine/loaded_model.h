// Everything needed to run a K3-architecture checkpoint directory with all
// weights resident: the bound checkpoint, the spine in RAM, the experts (here
// read into RAM; the store issue streams them), the tokenizer and a model.
#pragma once

#include <memory>
#include <string>

#include "format/k3_checkpoint.h"
#include "model/kimi_k3/model.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_pool.h"

namespace deltafin {

struct LoadedK3 {
  K3Checkpoint checkpoint;
  K3Weights weights;
  std::unique_ptr<ExpertSource> experts;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<K3Model> model;
  double load_seconds = 0;
};

std::unique_ptr<LoadedK3> load_k3_resident(const std::string& dir, int threads);

}  // namespace deltafin

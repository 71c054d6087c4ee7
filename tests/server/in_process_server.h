// An ApiServer over an Engine, in this process, on a free loopback port,
// serving on its own thread until destroyed; and the helpers the in-process
// HTTP tests share. By default it serves the shared tiny K3 model as "tiny".
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "model/loaders/family_loaders.h"
#include "model/qwen3_moe/qwen3_moe_generator.h"
#include "engine/engine.h"
#include "server/http_server.h"
#include "server/http_test_client.h"
#include "server/shared_test_model.h"
#include "support/test_support.h"

namespace deltafin::test {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using nlohmann::json;

// A server on a free loopback port, serving on its own thread until destroyed.
class TestServer {
public:
  explicit TestServer(EngineSettings so = {}, ServerOptions o = {}, LoadedModel* lm = nullptr)
      : service_(lm ? *lm : shared_tiny_model(11), so, &shutdown_) {
    o.host = "127.0.0.1";
    o.port = 0;
    if (o.model_name.empty()) o.model_name = "tiny";
    o.log_requests = false;
    server_ = std::make_unique<ApiServer>(service_, o);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
    // stop() is a no-op until the accept loop runs: wait until it answers.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (http_call(port_, "GET", "/health").status != 200 && Clock::now() < deadline)
      std::this_thread::sleep_for(milliseconds(5));
  }
  ~TestServer() {
    shutdown_.store(true);
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  Engine& service() { return service_; }
  json health() const { return http_call(port_, "GET", "/health").json(); }

private:
  std::atomic<bool> shutdown_{false};
  Engine service_;
  std::unique_ptr<ApiServer> server_;
  int port_ = 0;
  std::thread thread_;
};

inline HttpResponse post(int port, const std::string& path, const std::string& body,
                  const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  return http_call(port, "POST", path, body, headers);
}

// Polls `f` every 5 ms until it holds or `limit` passes.
template <class F>
bool eventually(F f, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return f();
}

// A Qwen3-MoE checkpoint whose greedy output is `script` (model/qwen3/qwen3_scripted.h).
inline std::unique_ptr<LoadedModel> scripted_qwen3(const test::TempDir& dir, const std::vector<std::string>& script) {
  Qwen3MoeGenerateOptions o;
  o.out_dir = dir.path() + "/ckpt";
  o.dims = qwen3_moe_preset("tiny");
  o.dims.mlp_only_layers = {0};
  o.script = ScriptedOutput{script};
  generate_qwen3_moe_checkpoint(o);
  return load_resident(o.out_dir, 1);
}


// Scripts of a model that writes Qwen3 tool-call markup wrong, with the text
// a client must be shown for each (never dropped): arguments that are not
// JSON, and a block never closed.
inline std::vector<std::pair<std::vector<std::string>, std::string>> malformed_call_scripts() {
  return {
      {{"<tool_call>", R"({"name": "get_weather", "arguments": )", "</tool_call>", "<|im_end|>"},
       R"(<tool_call>{"name": "get_weather", "arguments": </tool_call>)"},
      {{"Let me check. ", "<tool_call>", R"({"name": "get_weather")", "<|im_end|>"},
       R"(Let me check. <tool_call>{"name": "get_weather")"},
  };
}

}  // namespace deltafin::test

// The lines `run --stats`, `--stats-json`, `serve` and `logits` print, made
// by bench/run_report.h from the engine's data alone: a hand-filled RunStats
// against text worked out by hand from its figures.
#include "bench/run_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace deltafin {
namespace {

StepStats step(bool prefill, double ms, double wait_ms, uint64_t bytes, uint64_t demanded, uint64_t hits,
               uint64_t prefetch_hits, uint64_t misses) {
  StepStats s;
  s.prefill = prefill;
  s.ms = ms, s.wait_ms = wait_ms, s.bytes_read = bytes, s.demanded = demanded, s.hits = hits;
  s.prefetch_hits = prefetch_hits, s.misses = misses;
  return s;
}

ModelInfo streamed_model() {
  ModelInfo m;
  m.family = "Kimi K3";
  m.load_seconds = 1.5;
  m.memory.spine_bytes = 2'000'000'000;
  m.memory.slot_bytes = 1'000'000;
  m.memory.cache_slots = 100;
  m.memory.pinned_slots = 10;
  m.memory.working_slots = 20;
  m.memory.expert_bank_bytes = 5'000'000'000;
  m.memory.ram_available = 16'000'000'000;
  m.expert_bytes = 1'000'000;
  StreamInfo& s = m.stream.emplace();
  s.drives = 2;
  s.lookahead = LookaheadMode::Auto;
  s.io_engine = "pread";
  return m;
}

// A streamed run of 3 tokens after an 8-token prompt, one prefill pass and
// two decode steps, with n-gram drafting (one round of 4 drafted, 2 accepted,
// and one plain step).
RunStats streamed_run() {
  RunStats r;
  r.model = streamed_model();
  r.generate.prompt_tokens = 8;
  r.generate.new_tokens = 3;
  r.generate.prefill_seconds = 0.4;
  r.generate.ttft_seconds = 0.5;
  r.generate.token_ms = {10.0, 30.0};
  r.generate.reason = StopReason::MaxNew;
  r.session_bytes = 3'000'000;
  r.session_length = 11;
  r.session_fixed_bytes = 1'000'000;
  r.session_bytes_per_position = 200'000;
  r.drafter = "ngram";
  r.spec.plain_steps = 1, r.spec.rounds = 1, r.spec.drafted = 4, r.spec.accepted = 2, r.spec.round_tokens = 3;
  r.spec.draft_seconds = 0.001, r.spec.round_seconds = 0.02, r.spec.plain_seconds = 0.01;
  r.spec.rounds_by_k[4] = 1;
  StepStats prefill = step(true, 400, 100, 6'000'000, 10, 4, 1, 6);
  prefill.positions = 8, prefill.unique_new = 5;
  StepStats t1 = step(false, 10, 2, 2'000'000, 4, 2, 1, 2);
  t1.pilot_hits = 3, t1.pilot_actual = 4, t1.drive_mb_s = {100, 300};
  t1.prefetch_issued = 2, t1.prefetch_cancelled = 1, t1.prefetch_gated = 1;
  StepStats t2 = step(false, 30, 4, 4'000'000, 4, 4, 0, 0);
  t2.pilot_hits = 1, t2.pilot_actual = 4, t2.drive_mb_s = {200, 100};
  r.steps = {prefill, t1, t2};
  r.prefill = {.positions = 8, .passes = 1, .unique_pairs = 5, .unique_bytes = 5'000'000, .bytes_read = 6'000'000, .ms = 400};
  r.lookahead_gates = "layer 1: pilot, recall 0.75, 16 samples\n";
  r.peak_rss_bytes = 3'000'000'000;
  return r;
}

TEST(RunReport, DescribesTheModelFromItsInfo) {
  ModelInfo m = streamed_model();
  EXPECT_EQ(describe_model(m), "Kimi K3; spine bf16; experts streamed from 2 drive(s), cache 100.0 MB, lookahead auto, io pread");
  m.spine_format = "int8-row";
  m.stream->mirror = StreamInfo::Mirror{"http://mirror/k3", 7, 1'000'000'000};
  EXPECT_EQ(describe_model(m),
            "Kimi K3; spine int8-row (NOT weight-exact: int8-row spine); experts streamed from 2 drive(s), cache "
            "100.0 MB, lookahead auto, io pread; missing experts fetched from http://mirror/k3 (7 on the drives, disk "
            "budget 1.0 GB)");
  ModelInfo resident;
  resident.family = "Qwen3-MoE";
  EXPECT_EQ(describe_model(resident), "Qwen3-MoE; spine bf16; experts resident");
}

TEST(RunReport, LoadAndSessionLines) {
  ModelInfo m = streamed_model();
  const std::string plan =
      "memory: spine 2.0 GB + expert cache 100.0 MB (100 slots of 1.0 MB, at least 20 for one layer's reads and "
      "prefetch) + pinned 10.0 MB (10 hottest experts) = 2.1 GB; expert bank 5.0 GB; RAM available 16.0 GB\n";
  EXPECT_EQ(load_report(m), plan);
  m.stream->io_note = "io_uring refused; using the pread pool";
  EXPECT_EQ(load_report(m), plan + "note: io_uring refused; using the pread pool\n");
  EXPECT_EQ(load_report(ModelInfo{}), "");

  SessionInfo s{.budget_bytes = 500'000'000, .bytes_per_position = 200'000, .fixed_bytes = 1'000'000, .context_limit = 2048,
                .limit_by = SessionInfo::LimitBy::Budget};
  EXPECT_EQ(session_report(s),
            "session: budget 500.0 MB, 200000 B per position + 1.0 MB fixed; context limit 2048 positions (what the "
            "budget holds)\n");
  s.limit_by = SessionInfo::LimitBy::Option;
  EXPECT_NE(session_report(s).find("(--context)"), std::string::npos);
}

TEST(RunReport, StatsTextOfAStreamedSpeculativeRun) {
  // Decode totals: 40 ms over 2 steps; 6 of 8 demanded experts hit; recall
  // 4/8; drives time-weighted: (100*10 + 200*30)/40 = 175, (300*10 + 100*30)/40 = 150.
  // Speculation: (1 + 3) tokens / 2 steps; rounds 3/0.02 s against plain 1/0.01 s.
  EXPECT_EQ(run_stats_text(streamed_run()),
            "\n-- stats --\n"
            "load 1.50 s; prompt 8 tokens; prefill 400.0 ms (20.0 tokens/s); time to first token 500.0 ms\n"
            "per-token ms: 10.00 30.00\n"
            "decode 2 tokens in 40.0 ms (50.00 tokens/s)\n"
            "generated 3 tokens; stopped: max-new reached\n"
            "session: 3.0 MB for 11 positions (1.0 MB fixed + 200000 B per position)\n"
            "speculation (ngram): 1 verification rounds + 1 plain steps for 2 decode tokens (2.00 tokens/step); "
            "drafted 4, accepted 2 (50.0%); drafting 1.0 ms, rounds 20.0 ms, plain 10.0 ms; rounds by k: k4:1; "
            "rounds emitted 1.50x the plain steps' tokens per second; expert bytes read per emitted token 3.0 MB\n"
            "prefill 0: 400.0 ms (waiting 100.0), read 6.0 MB, experts 10: 4 hits (1 prefetched), 0 in flight, 6 misses\n"
            "token 1: 10.0 ms (waiting 2.0), read 2.0 MB, experts 4: 2 hits (1 prefetched), 0 in flight, 2 misses, "
            "lookahead recall 0.75, drives MB/s 100 300\n"
            "token 2: 30.0 ms (waiting 4.0), read 4.0 MB, experts 4: 4 hits (0 prefetched), 0 in flight, 0 misses, "
            "lookahead recall 0.25, drives MB/s 200 100\n"
            "prefill: 8 positions in 1 passes, 400.0 ms (20.0 tokens/s), read 6.0 MB for 5 unique experts (5.0 MB): "
            "amplification 1.20\n"
            "decode: 2 steps, 20.0 ms/token (3.0 waiting on reads), 3.0 MB read/token, hit rate 0.750 (6 hits incl. 1 "
            "prefetched, 0 in flight, 2 misses of 8); lookahead recall 0.500; prefetches 2 read (1 cancelled), 1 held "
            "back by the idle-window gate; drives MB/s 175 150\n"
            "peak RSS 3.0 GB (plan: 2.0 GB spine + 100.0 MB cache + 10.0 MB pinned)\n"
            "lookahead per layer (recall EMA, samples):\n"
            "layer 1: pilot, recall 0.75, 16 samples\n");
}

TEST(RunReport, StatsTextOfAResidentPlainRunHasNoStreamOrSpeculationLines) {
  RunStats r = streamed_run();
  r.model.stream.reset();
  r.drafter = "none";
  r.mirror = MirrorTotals{};  // only a streamed run reports its mirror
  EXPECT_EQ(run_stats_text(r),
            "\n-- stats --\n"
            "load 1.50 s; prompt 8 tokens; prefill 400.0 ms (20.0 tokens/s); time to first token 500.0 ms\n"
            "per-token ms: 10.00 30.00\n"
            "decode 2 tokens in 40.0 ms (50.00 tokens/s)\n"
            "generated 3 tokens; stopped: max-new reached\n"
            "session: 3.0 MB for 11 positions (1.0 MB fixed + 200000 B per position)\n");
}

TEST(RunReport, StatsJsonCarriesEveryStepAndTheTotals) {
  const RunStats r = streamed_run();
  const nlohmann::json j = nlohmann::json::parse(run_stats_json(r));
  EXPECT_EQ(j.at("config"), describe_model(r.model));
  EXPECT_EQ(j.at("spine_bytes"), 2'000'000'000u);
  EXPECT_EQ(j.at("cache_bytes"), 100'000'000u);
  EXPECT_EQ(j.at("pinned_bytes"), 10'000'000u);
  EXPECT_EQ(j.at("expert_bytes"), 1'000'000u);
  EXPECT_EQ(j.at("peak_rss_bytes"), 3'000'000'000u);
  ASSERT_EQ(j.at("steps").size(), 3u);
  EXPECT_EQ(j.at("steps")[0].at("prefill"), true);
  EXPECT_EQ(j.at("steps")[1].at("drive_mb_s"), nlohmann::json::array({100.0, 300.0}));
  EXPECT_EQ(j.at("steps")[2].at("hits"), 4u);
  EXPECT_EQ(j.at("prefill").at("ttft_ms"), 500.0);
  EXPECT_EQ(j.at("prefill").at("amplification"), 1.2);
  EXPECT_EQ(j.at("generated_tokens"), 3);
  EXPECT_EQ(j.at("decode_ms"), 40.0);
  EXPECT_EQ(j.at("spec").at("drafter"), "ngram");
  EXPECT_EQ(j.at("spec").at("rounds_by_k"), nlohmann::json::array({0, 0, 0, 0, 1, 0, 0, 0}));
}

}  // namespace
}  // namespace deltafin

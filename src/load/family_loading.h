// What every family's loader (src/model/<family>/load/) does the same way:
// time the load, fingerprint what decides the numerics, open a store's
// streaming expert source and its mirror fetcher. The loaders fill a
// LoadedModel with these; nothing here knows a family.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "load/engine_options.h"
#include "load/loaded_model.h"

namespace deltafin {

double seconds_since(std::chrono::steady_clock::time_point t0);

// An error naming --threads unless it is at least 1.
void check_threads(int threads);

// SHA-256 (hex) of a Hugging Face checkpoint directory's identity:
// config.json, the shard index and every shard's name and size.
std::string checkpoint_fingerprint(const std::string& dir);
// SHA-256 (hex) of a store's config.json and store.json (which names the
// spine format and every expert's hash).
std::string store_fingerprint(const std::string& dir);

// The reader options a store is opened with, from the user's settings; an
// unknown I/O engine is an error naming --io.
ReaderOptions reader_options(const ReadSettings& s);

// What every store run opens once its manifest and memory plan are set: the
// heat histogram, the monitor (and trace) and the streaming expert source
// with its cache, warmed with the pinned experts; `fetch` for a store whose
// experts come from a mirror.
void open_streaming_experts(LoadedModel& m, const EngineOptions& o, int64_t experts_per_token, bool gate_by_idle,
                            const std::optional<FetchOptions>& fetch);

// How a streamed store's missing experts are fetched from its mirror (none
// for a store whose experts are all local). The fetched bytes are checked
// against the record's MXFP4 structure where it has MXFP4 matrices.
std::optional<FetchOptions> mirror_fetch_options(const StoreManifest& man, const std::vector<RecordPart>& record,
                                                 const EngineOptions& o);

// Opens the manifest of `store_dir` into m (store_dir, manifest, fingerprint)
// and checks it is a store of m.family (set before).
void open_store_manifest(LoadedModel& m, const std::string& store_dir);

}  // namespace deltafin

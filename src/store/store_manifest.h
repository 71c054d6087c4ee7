// store.json: the manifest of a deltafin store (design.md §3). It names the
// source checkpoint, the spine files and their format, the drives with their
// measured bandwidth, and for every (layer, expert) its drives and hashes.
// Written last by setup (atomically), so a store with a manifest is complete.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/common/family_checkpoint.h"

namespace deltafin {

// Version 2 added the optional "remote" section (setup --stream), version 3
// striped stores ("stripe_offsets"), version 4 the model family, its MoE
// layers and the expert record's layout ("family", "moe_layers", "record");
// older stores are still read (as Kimi K3 stores: MoE layers 1 .. L-1).
constexpr int kStoreManifestVersion = 4;

enum class SpineFormat { BF16, Int8Row };
const char* spine_format_name(SpineFormat f);            // "bf16" | "int8-row"
SpineFormat parse_spine_format(const std::string& name);  // else a named error

struct SourceFile {
  std::string name;      // relative to the source checkpoint directory
  uint64_t bytes = 0;
  std::string sha256;    // hex; empty for safetensors shards (their experts are hashed one by one)
};

struct StoreDrive {
  std::string path;            // absolute
  double read_bytes_per_s = 0; // setup's direct-read probe
  std::string bandwidth_source;  // "probed with O_DIRECT", "probed with buffered reads (...)", "given by --drive-mbps"
};

struct SpineFileEntry {
  std::string path;  // relative to the store directory, e.g. "spine/L003.bin"
  uint64_t bytes = 0;
  std::string sha256;
};

struct ExpertEntry {
  // Whole layout: the drives holding a full copy, first = primary. Striped:
  // every drive, in order (drive d holds stripe d). Empty for non-MoE layers.
  std::vector<uint16_t> drives;
  std::array<uint8_t, 32> sha256{};  // of the released bytes
  uint32_t crc32c = 0;               // of the same bytes, checked on every read
  // False in a streamed store for an expert not yet fetched: its hash is
  // learnt at first fetch and kept in remote/hashes.bin (src/remote).
  bool hash_known = true;
  std::vector<uint32_t> stripe_crc32c;  // striped stores: CRC-32C of each drive's stripe, checked on every read
};

// A file of the mirror a streamed store fetches from.
struct RemoteFile {
  std::string name;    // relative to the mirror URL
  uint64_t bytes = 0;
  std::string etag;    // the mirror's ETag at setup ("" if none); sent as If-Match
  std::string sha256;  // hex, as the mirror publishes it in its checksum list; "" when it does not
};

// setup --stream / --full: where the experts come from.
struct RemoteSource {
  std::string url;                // the mirror, without a trailing '/'
  std::string checksums;          // the mirror's published SHA-256 list it had ("SHA256SUMS"), or ""
  std::vector<RemoteFile> shards; // the safetensors shards; remote/experts.bin indexes into this list
  uint64_t disk_budget_bytes = 0; // fetched experts may take this much of the drives; 0 = no limit
};

struct StoreManifest {
  int version = kStoreManifestVersion;
  std::string source_dir;
  std::vector<SourceFile> source_files;
  SpineFormat spine_format = SpineFormat::BF16;
  std::string spine_reason;          // why setup chose this format (auto) or "requested"
  uint64_t spine_bytes = 0;          // resident bytes once loaded
  std::vector<SpineFileEntry> spine_files;
  std::vector<StoreDrive> drives;
  std::string family = "kimi_k3";    // model/registry.h's name
  int64_t layers = 0, experts = 0;   // num_hidden_layers, n_routed_experts
  std::vector<int64_t> moe_layers;   // 0-based layers with routed experts, ascending
  std::vector<RecordPart> record;    // the record's layout (empty in stores before version 4)
  uint64_t expert_bytes = 0;         // every record has this size (k3_expert_record_bytes)
  // Empty: every expert file holds a whole record (the "whole" layout).
  // Otherwise the store is striped: drives.size() + 1 byte offsets into every
  // record (0, ..., expert_bytes, 4096-aligned inside), and drive d holds
  // bytes [stripe_offsets[d], stripe_offsets[d + 1]) of each expert, so every
  // read keeps all drives busy for the same time whichever experts a token
  // routes to (see stripe_offsets_for in placement.h).
  std::vector<uint64_t> stripe_offsets;
  // The MoE layers' experts only, in the order `placement` lists them:
  // [position of the layer in moe_layers * experts + expert]. A dense layer
  // has none, so `layers`, a count the file claims, sizes no table.
  std::vector<ExpertEntry> entries;
  std::optional<RemoteSource> remote;  // set for streamed stores

  // A dense layer's experts read as an empty entry (no drives); a layer or
  // expert outside the store is a named error.
  const ExpertEntry& entry(int64_t layer, int64_t expert) const;
  // The entry of an expert of a MoE layer, to fill in (setup); a dense layer
  // is a named error.
  ExpertEntry& moe_entry(int64_t layer, int64_t expert);
  bool is_moe_layer(int64_t layer) const;
  // <drive>/deltafin-experts/L{layer:03d}/E{expert:03d}.bin
  std::string expert_path(int drive, int64_t layer, int64_t expert) const;
  bool striped() const { return !stripe_offsets.empty(); }
  uint64_t stripe_bytes(int drive) const;  // striped stores only
  // <drive>/deltafin-experts/L{layer:03d}/E{expert:03d}.s{drive}of{drives}.bin
  std::string stripe_path(int drive, int64_t layer, int64_t expert) const;
  // The file(s) drive d holds for this expert and their size: its stripe in a
  // striped store, else the whole record (when d is one of its drives).
  std::string file_on_drive(int drive, int64_t layer, int64_t expert) const;
  uint64_t bytes_on_drive(int drive) const;

private:
  // Where (layer, expert) is in `entries`; nullopt for a dense layer.
  std::optional<size_t> entry_index(int64_t layer, int64_t expert) const;
};

std::string expert_relative_path(int64_t layer, int64_t expert);  // deltafin-experts/L001/E007.bin
// deltafin-experts/L001/E007.s2of4.bin
std::string stripe_relative_path(int64_t layer, int64_t expert, int stripe, int stripes);

// store_dir/store.json; every field checked, errors name the file and field.
StoreManifest load_store_manifest(const std::string& store_dir);
// The same from the file's text; `file` names it in errors.
StoreManifest parse_store_manifest(std::string_view text, const std::string& file);

// For per-(MoE layer, expert) tables (the hash journal, the expert ranges):
// [layer] -> the layer's position in `moe_layers`, -1 for a dense layer, for
// layers 0 .. layers-1. `where` names the table in the error when
// moe_layers is not ascending or holds a layer past `layers`.
std::vector<int64_t> moe_layer_positions(const std::vector<int64_t>& moe_layers, int64_t layers, const std::string& where);
void save_store_manifest(const std::string& store_dir, const StoreManifest& m);  // atomic
// The text save_store_manifest writes; parse_store_manifest reads it back as `m`.
std::string format_store_manifest(const StoreManifest& m);

}  // namespace deltafin

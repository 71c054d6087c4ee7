// Which drive(s) hold each routed expert (design.md §3). A pure function of
// its inputs, so the same drives and bandwidths always give the same store.
//
// - Every MoE layer's experts are spread over all drives in proportion to
//   bandwidth: a token reads 16 experts of one layer at once, and those reads
//   must keep every drive busy and finish together.
// - Bandwidths within 15% of each other count as equal (see placement_weights):
//   probe noise must not make two identical drives hold different shares.
// - A layer's share that does not divide evenly goes round the drives from
//   layer to layer, so no drive always takes the remainder.
// - Within a layer, expert ids are interleaved over the drives (equal drives:
//   consecutive ids are on different drives).
// - With a heat histogram (the one the cache and --replicate-hot read), a
//   layer's files per drive stay as above, but which experts each drive holds
//   balances heat instead of ids: hottest first, each to the drive with the
//   least heat per unit of bandwidth that still has room. Under skewed
//   routing, id interleaving can put several of the hottest experts on one
//   drive, which then takes most of a token's reads while the others idle.
// - Replicas: each hot (layer, expert) gets a second drive, the other drive
//   with the least load (that layer's heat per unit of bandwidth when there
//   is heat, else its files; then the whole store's files), so a replicated
//   read can go where it finishes first. A replica takes half its expert's
//   heat from the primary's drive: reads go to either copy.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace deltafin {

struct PlacementInput {
  int64_t layers = 0, experts = 0;
  std::vector<int64_t> moe_layers;        // layers that have routed experts, ascending
  std::vector<double> drive_bytes_per_s;  // one per drive, > 0
  std::vector<std::pair<int64_t, int64_t>> replicate;  // (layer, expert) to copy to a second drive
  // [layer * experts + expert] use counts (store/heat.h), or empty: no heat
  // (ids interleaved). A layer whose counts are all zero is interleaved too.
  std::vector<double> heat;
  // [layer * experts + expert] primary drive to keep (a rerun of setup on the
  // same drives: moving primaries would rewrite the store), or empty.
  std::vector<uint16_t> keep_primaries;
};

// [layer * experts + expert] -> drives, primary first; empty for layers
// without routed experts. Errors (named) on bad input, e.g. replicas with one drive.
std::vector<std::vector<uint16_t>> place_experts(const PlacementInput& in);

// The weight each drive's share is computed from: drives are sorted by
// bandwidth and grouped while within 15% of the group's slowest; every drive of
// a group gets the group's mean.
std::vector<double> placement_weights(const std::vector<double>& drive_bytes_per_s);

// Striped layout: the byte offsets (drives + 1 of them, 0 .. record_bytes)
// that cut every record into one stripe per drive, each stripe's share of the
// record in proportion to placement_weights, stripe boundaries on 4096-byte
// pages (direct I/O reads each stripe straight into its place in the cache
// slot). Shares are rounded by largest remainder, so equal drives get pages
// that differ by at most one. Fails (naming the sizes) when a drive would get
// no page at all.
std::vector<uint64_t> stripe_offsets_for(uint64_t record_bytes, const std::vector<double>& drive_bytes_per_s);

}  // namespace deltafin

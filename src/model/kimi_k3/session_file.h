// A K3 session's state at one length as bytes, for prompt states kept on
// disk (engine/prompt_disk_cache.h). Layer by layer in order: a KDA layer's
// three convolution windows and its recurrent state, an MLA layer's latent
// rows 0 .. length-1; every value fp32, little-endian, exactly as held, so a
// restored session equals the one that was saved bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kimi_k3/session.h"

namespace deltafin {

// Bytes encode_session_state writes for `length` positions.
uint64_t session_state_bytes(const K3Config& config, int64_t length);

// The state after `length` positions: the KDA state from `kda` (a snapshot
// taken when the session had exactly that length) and the first `length`
// latent rows of `session` (which may hold more: its rows only grow).
std::vector<uint8_t> encode_session_state(const K3Config& config, const K3Session::Snapshot& kda,
                                          const K3Session& session, int64_t length);

// Restores a fresh `session` to the encoded state. Throws deltafin::Error
// (naming what does not fit) when the bytes are not a state of this config
// and length; the session is then left fresh.
void decode_session_state(const K3Config& config, const uint8_t* data, uint64_t size, int64_t length,
                          K3Session& session);

}  // namespace deltafin

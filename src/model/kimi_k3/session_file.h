// A K3 session's state at one length as bytes, for prompt states kept on
// disk (engine/prompt_disk_cache.h). Layer by layer in order: a KDA layer's
// three convolution windows and its recurrent state, an MLA layer's latent
// rows 0 .. length-1; every value fp32, little-endian, exactly as held, so a
// restored session equals the one that was saved bit for bit.
#pragma once

#include <cstdint>
#include <functional>

#include "model/kimi_k3/session.h"

namespace deltafin {

// Bytes encode_session_state writes for `length` positions.
uint64_t session_state_bytes(const K3Config& config, int64_t length);

// The state after `length` positions, part by part in file order, without a
// copy: the KDA state from `kda` (a snapshot taken when the session had
// exactly that length) and the first `length` latent rows of `session`
// (which may hold more: its rows only grow). `part` gets each run of floats.
void for_each_state_part(const K3Config& config, const K3Session::Snapshot& kda, const K3Session& session,
                         int64_t length, const std::function<void(const float*, size_t)>& part);

// Fills a fresh `session` with the state of `length` positions, `read`
// filling each part (in file order, straight into the session's storage),
// and advances it. Throws deltafin::Error when the session is not fresh;
// whatever `read` throws leaves the session to be reset by the caller.
void read_state_parts(const K3Config& config, int64_t length, K3Session& session,
                      const std::function<void(float*, size_t)>& read);

}  // namespace deltafin

// Internal to platform: the two Poller backends, each in its own file.
#pragma once

#include <memory>
#include <string>

#include "platform/poller.h"

namespace deltafin::platform {

// poll(2): every POSIX system. Cannot fail to be made (it holds no descriptor).
std::unique_ptr<Poller> make_poll_poller();
// epoll: Linux only; elsewhere nullptr with *why saying so.
std::unique_ptr<Poller> make_epoll_poller(std::string* why);

}  // namespace deltafin::platform

// A non-owning reference to a callable, for callbacks that are called only
// during the call that receives them (a thread pool's loop body, a product's
// per-row epilogue). Unlike std::function it never copies the callable, so
// passing a lambda with any captures allocates nothing: the decode path's
// hand-offs to the threads happen per product, per layer, per token.
// The referenced callable must outlive every call through the reference.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace deltafin {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
public:
  template <typename Callable>
    requires(!std::is_same_v<std::remove_cvref_t<Callable>, FunctionRef> &&
             std::is_invocable_r_v<R, Callable&, Args...>)
  FunctionRef(Callable&& c) noexcept  // NOLINT: implicit, as std::function's
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(c)))),
        call_([](void* o, Args... args) -> R {
          return std::invoke(*static_cast<std::remove_reference_t<Callable>*>(o), std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace deltafin

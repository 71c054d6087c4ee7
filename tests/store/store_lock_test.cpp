// store/setup.lock (store/install.h): setup holds it exclusively, every other
// writer of the store shared while its temporary exists. What each gets while
// the other holds it, setup's wait for writers, and a holder killed by SIGKILL.
#include "store/install.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>

#include "support/test_support.h"

using namespace deltafin;
using deltafin::test::TempDir;

TEST(StoreLock, WritersShareItAndASetupShutsThemOut) {
  TempDir store;
  {
    const StoreWriteLock a(store.path()), b(store.path());
    EXPECT_TRUE(a.held());
    EXPECT_TRUE(b.held()) << "two runs writing one store do not stop each other";
  }
  {
    const StoreLock setup(store.path());
    EXPECT_FALSE(StoreWriteLock(store.path()).held()) << "a writer must not start a temporary while setup sweeps";
    EXPECT_FAILS_WITH(StoreLock(store.path()), "another deltafin setup is writing this store",
                      store.path() + "/setup.lock");
  }
  EXPECT_TRUE(StoreWriteLock(store.path()).held()) << "released with the setup";
}

// A writer holds the lock for one file's write: setup waits for it (and says
// so once), unless told not to wait.
TEST(StoreLock, SetupWaitsForAWriterToFinish) {
  TempDir store;
  std::optional<StoreWriteLock> writer;
  writer.emplace(store.path());
  ASSERT_TRUE(writer->held());
  StoreLockWait no_wait;
  no_wait.seconds = 0;
  EXPECT_FAILS_WITH(StoreLock(store.path(), no_wait), "a deltafin run, serve or prefetch kept writing into this store",
                    store.path() + "/setup.lock");
  int told = 0;
  StoreLockWait wait;  // the default 60 s; the writer finishes as soon as setup says it waits
  wait.on_wait = [&] {
    ++told;
    writer.reset();
  };
  const StoreLock setup(store.path(), wait);
  EXPECT_EQ(told, 1);
  EXPECT_FALSE(StoreWriteLock(store.path()).held());
}

// The kernel drops an flock when its holder dies, however: a setup killed
// with SIGKILL never leaves a lock behind (so its temporaries are the next
// setup's to remove).
TEST(StoreLock, ASetupKilledWithSigkillLeavesNoLock) {
  TempDir store;
  const std::string path = store_lock_path(store.path());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // system calls only, in the child of a threaded process
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    const char ok = fd >= 0 && ::flock(fd, LOCK_EX) == 0 ? 'y' : 'n';
    (void)!::write(ready[1], &ok, 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(ok, 'y');
  EXPECT_FAILS_WITH(StoreLock(store.path()), "another deltafin setup");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  const StoreLock setup(store.path());
  EXPECT_FALSE(StoreWriteLock(store.path()).held());
}

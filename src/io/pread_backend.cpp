// The pread pool: queue_depth worker threads per drive, each running one chunk
// at a time with blocking preads. The scheduler never starts more than
// queue_depth chunks on a drive, so a started chunk always finds a free worker.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "io/chunk_io.h"

namespace deltafin::io_detail {

namespace {

class PreadBackend final : public Backend {
public:
  PreadBackend(std::vector<DriveFiles*> files, int queue_depth, ChunkSink& sink) : files_(std::move(files)), sink_(sink) {
    for (size_t d = 0; d < files_.size(); ++d) drives_.push_back(std::make_unique<Drive>());
    for (size_t d = 0; d < files_.size(); ++d)
      for (int i = 0; i < queue_depth; ++i) threads_.emplace_back([this, d] { worker(d); });
  }
  ~PreadBackend() override { stop(); }

  void start(const ChunkJob& job) override {
    Drive& drive = *drives_[static_cast<size_t>(job.drive)];
    {
      std::lock_guard<std::mutex> lock(drive.mu);
      drive.jobs.push_back(job);
    }
    drive.cv.notify_one();
  }

  void stop() override {
    for (auto& drive : drives_) {
      std::lock_guard<std::mutex> lock(drive->mu);
      drive->stop = true;
      drive->cv.notify_all();
    }
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

private:
  struct Drive {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<ChunkJob> jobs;
    bool stop = false;
  };

  void worker(size_t d) {
    Drive& drive = *drives_[d];
    for (;;) {
      ChunkJob job;
      {
        std::unique_lock<std::mutex> lock(drive.mu);
        drive.cv.wait(lock, [&] { return !drive.jobs.empty() || drive.stop; });
        if (drive.jobs.empty()) return;
        job = drive.jobs.front();
        drive.jobs.pop_front();
      }
      sink_.chunk_finished(job, run_chunk_sync(*files_[d], job));
    }
  }

  std::vector<DriveFiles*> files_;
  ChunkSink& sink_;
  std::vector<std::unique_ptr<Drive>> drives_;
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<Backend> make_pread_backend(std::vector<DriveFiles*> files, int queue_depth, ChunkSink& sink) {
  return std::make_unique<PreadBackend>(std::move(files), queue_depth, sink);
}

}  // namespace deltafin::io_detail

#include "support.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

extern "C" {
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>
}

namespace dcache::e2e::modes {

// ---- fsal_stats ------------------------------------------------------------------

std::size_t fsal_stats::parse(const std::string& text) {
  // dcache-stats --json: {"<export id>": {"<counter>": count, "<op>":
  // [count, avg_ms, min_ms, max_ms], ...}, ...}; the service times are
  // left out.
  _values.clear();
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object()) return 0;
  for (const auto& [export_id, counters] : doc.items()) {
    if (!counters.is_object()) continue;
    for (const auto& [name, value] : counters.items())
      if (value.is_number_unsigned())
        _values["export_" + export_id + "." + name] = value.get<std::uint64_t>();
  }
  return _values.size();
}

namespace {

// Runs tools/dcache-stats (the one reader of the plugin's counters) with
// args; text gets what it printed.
int dcache_stats(const char* args, std::string& text, std::string& why) {
  if (env_or_empty("DBUS_SYSTEM_BUS_ADDRESS").empty()) {
    why = "DBUS_SYSTEM_BUS_ADDRESS is not set (run through its tests/e2e/test_*.py)";
    return -EINVAL;
  }
  const std::string cmd = std::string(DCACHE_STATS_TOOL) + " " + args;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    why = "popen(" + cmd + "): " + std::strerror(errno);
    return -errno;
  }
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  const int rc = ::pclose(p);
  if (rc != 0) {
    why = cmd + " failed (status " + std::to_string(rc) + "): " + text.substr(0, 400);
    return -EIO;
  }
  return 0;
}

}  // namespace

int fsal_stats::reset(std::string& why) {
  std::string text;
  return dcache_stats("--json --reset", text, why);
}

int fsal_stats::load(std::string& why) {
  std::string text;
  if (const int rc = dcache_stats("--json", text, why); rc != 0) return rc;
  if (!nlohmann::json::accept(text)) {
    why = "dcache-stats --json printed no JSON: " + text.substr(0, 400);
    return -EPROTO;
  }
  parse(text);
  return 0;
}

std::uint64_t fsal_stats::get(int export_id, const std::string& counter) const {
  const auto it = _values.find("export_" + std::to_string(export_id) + "." + counter);
  return it == _values.end() ? 0 : it->second;
}

// ---- cachestat ----------------------------------------------------------------

namespace {
constexpr long k_sys_cachestat = 451;  // x86_64 (and every arch since 6.5)

// Closes a descriptor on scope exit.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

int cachestat_path(const std::string& path, std::uint64_t off, std::uint64_t len, cachestat_result& out) {
  // O_RDONLY is enough for root: the kernel wants write permission or
  // ownership, which root has (inode_owner_or_capable).
  fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) return -errno;
  cachestat_range range{off, len};
  out = {};
  if (::syscall(k_sys_cachestat, fd.fd, &range, &out, 0) != 0) return -errno;
  return 0;
}

int wait_clean(const std::string& path, int timeout_ms, cachestat_result& out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int rc = cachestat_path(path, 0, 0, out);
    if (rc != 0) return rc;
    if (out.nr_dirty + out.nr_writeback == 0) return 0;
    if (std::chrono::steady_clock::now() >= deadline) return -ETIMEDOUT;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int drop_local_cache(const std::string& path) {
  fd_guard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) return -errno;
  if (::fsync(fd.fd) != 0) return -errno;
  // posix_fadvise returns its error instead of setting errno.
  const int rc = ::posix_fadvise(fd.fd, 0, 0, POSIX_FADV_DONTNEED);
  return rc == 0 ? 0 : -rc;
}

// ---- raw NFSv3 ----------------------------------------------------------------

namespace {

// libnfs 4.0 keeps struct nfs_fh (what nfs_get_fh returns) private; its
// layout there is { int len; char *val; }.
struct libnfs_fh_layout {
  int len;
  char* val;
};

struct rpc_wait {
  bool done = false;
  int rpc_status = RPC_STATUS_ERROR;
  int nfs_status = -1;
  std::uint32_t count = 0;
  int committed = -1;
  std::string error;
};

void write_cb(struct rpc_context* /*rpc*/, int status, void* data, void* private_data) {
  auto* w = static_cast<rpc_wait*>(private_data);
  w->done = true;
  w->rpc_status = status;
  if (status == RPC_STATUS_SUCCESS) {
    const auto* res = static_cast<const WRITE3res*>(data);
    w->nfs_status = res->status;
    if (res->status == NFS3_OK) {
      w->count = res->WRITE3res_u.resok.count;
      w->committed = res->WRITE3res_u.resok.committed;
    }
  } else if (status == RPC_STATUS_ERROR && data != nullptr) {
    w->error = static_cast<const char*>(data);
  }
}

void commit_cb(struct rpc_context* /*rpc*/, int status, void* data, void* private_data) {
  auto* w = static_cast<rpc_wait*>(private_data);
  w->done = true;
  w->rpc_status = status;
  if (status == RPC_STATUS_SUCCESS)
    w->nfs_status = static_cast<const COMMIT3res*>(data)->status;
  else if (status == RPC_STATUS_ERROR && data != nullptr)
    w->error = static_cast<const char*>(data);
}

// Services the context until the callback ran, or 60 s passed.
int pump(struct rpc_context* rpc, rpc_wait& w) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!w.done) {
    struct pollfd pfd {};
    pfd.fd = rpc_get_fd(rpc);
    pfd.events = static_cast<short>(rpc_which_events(rpc));
    if (::poll(&pfd, 1, 100) < 0 && errno != EINTR) return -errno;
    if (rpc_service(rpc, pfd.revents) < 0) {
      w.error = rpc_get_error(rpc);
      return -EIO;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      w.error = "no reply within 60 s";
      return -ETIMEDOUT;
    }
  }
  return 0;
}

}  // namespace

raw_v3_file::~raw_v3_file() {
  if (_fh != nullptr) (void)nfs_close(_client->raw(), _fh);
}

int raw_v3_file::create(nfs_client& client, const std::string& path) {
  if (client.version() != nfs_version::v3) return -EINVAL;
  _client = &client;
  return nfs_creat(client.raw(), path.c_str(), 0644, &_fh) == 0 ? 0 : -EIO;
}

long long raw_v3_file::write(std::uint64_t offset, std::span<const std::byte> data, stable_how how,
                             stable_how& committed, std::string& why) {
  if (_fh == nullptr) return -EBADF;
  const auto* fh = reinterpret_cast<const libnfs_fh_layout*>(nfs_get_fh(_fh));
  if (fh == nullptr || fh->len <= 0 || fh->len > 64) {
    why = "libnfs file handle has an unexpected layout";
    return -EPROTO;
  }
  WRITE3args args{};
  args.file.data.data_len = static_cast<u_int>(fh->len);
  args.file.data.data_val = fh->val;
  args.offset = offset;
  args.count = static_cast<count3>(data.size());
  args.stable = static_cast<::stable_how>(how);
  args.data.data_len = static_cast<u_int>(data.size());
  // libnfs only reads the payload; its struct is not const-correct.
  args.data.data_val = const_cast<char*>(reinterpret_cast<const char*>(data.data()));
  struct rpc_context* rpc = nfs_get_rpc_context(_client->raw());
  rpc_wait w;
  if (rpc_nfs3_write_async(rpc, write_cb, &args, &w) != 0) {
    why = std::string("rpc_nfs3_write_async: ") + rpc_get_error(rpc);
    return -EIO;
  }
  if (const int rc = pump(rpc, w); rc != 0) {
    why = w.error;
    return rc;
  }
  if (w.rpc_status != RPC_STATUS_SUCCESS || w.nfs_status != NFS3_OK) {
    why = "WRITE3 failed: rpc status " + std::to_string(w.rpc_status) + ", nfsstat3 " +
          std::to_string(w.nfs_status) + " " + w.error;
    return -EIO;
  }
  committed = static_cast<stable_how>(w.committed);
  return w.count;
}

int raw_v3_file::commit(std::uint64_t offset, std::uint32_t count, std::string& why) {
  if (_fh == nullptr) return -EBADF;
  const auto* fh = reinterpret_cast<const libnfs_fh_layout*>(nfs_get_fh(_fh));
  COMMIT3args args{};
  args.file.data.data_len = static_cast<u_int>(fh->len);
  args.file.data.data_val = fh->val;
  args.offset = offset;
  args.count = count;
  struct rpc_context* rpc = nfs_get_rpc_context(_client->raw());
  rpc_wait w;
  if (rpc_nfs3_commit_async(rpc, commit_cb, &args, &w) != 0) {
    why = std::string("rpc_nfs3_commit_async: ") + rpc_get_error(rpc);
    return -EIO;
  }
  if (const int rc = pump(rpc, w); rc != 0) {
    why = w.error;
    return rc;
  }
  if (w.rpc_status != RPC_STATUS_SUCCESS || w.nfs_status != NFS3_OK) {
    why = "COMMIT3 failed: rpc status " + std::to_string(w.rpc_status) + ", nfsstat3 " +
          std::to_string(w.nfs_status) + " " + w.error;
    return -EIO;
  }
  return 0;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace dcache::e2e::modes

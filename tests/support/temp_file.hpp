// A temporary file for tests that need a real descriptor: created in `dir`
// (mkostemp, close-on-exec), closed and unlinked on destruction.
// Not thread-safe; not copyable.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace dcache::test {

class temp_file {
public:
	explicit temp_file(const char *dir = "/tmp")
	{
		_path = std::string(dir) + "/dcache_test_XXXXXX";
		_fd = mkostemp(_path.data(), O_CLOEXEC);
	}
	temp_file(const temp_file &) = delete;
	temp_file &operator=(const temp_file &) = delete;
	~temp_file()
	{
		if (_fd >= 0) {
			close(_fd);
			unlink(_path.c_str());
		}
	}
	// -1 when the file could not be created (check it in the test).
	[[nodiscard]] int fd() const { return _fd; }
	[[nodiscard]] const std::string &path() const { return _path; }

private:
	std::string _path;
	int _fd = -1;
};

} // namespace dcache::test

// `-o` and every other result file never destroy a file (issue 35, item 5):
// an output naming an input, a directory, a device, a FIFO or a socket is
// refused before any work; a symbolic link is followed (the file it points
// to is replaced, the link kept); a failed write (file-size limit, a full
// disk) leaves the previous file as it was, inode and bytes, and no
// temporary file; a second writer of the same name is refused by name; a
// result lost on stdout (--json > /dev/full) is an error.
#include <fcntl.h>
#include <hdf5.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/hdf5_status.hpp"
#include "support/run_costate.hpp"

namespace {

namespace fs = std::filesystem;
using Result = costate::test::CommandResult;

const char* const kInput =
    "model: lotka_volterra\n"
    "parameters: {alpha: 1.5, beta: 1.0, delta: 1.0, gamma: 3.0}\n"
    "initial_state: {x: 1.0, y: 1.0}\n"
    "time: {start: 0.0, end: 10.0, output_every: 0.5}\n"
    "integrator: {method: dopri5, rtol: 1.0e-8, atol: 1.0e-10}\n";

class OutputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("costate_output_files_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "lv.yaml") << kInput;
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  Result run(const std::string& args, const std::string& prefix = "") {
    return costate::test::run_command(dir_, COSTATE_EXE, args, prefix + " timeout -s KILL 120");
  }
  std::string slurp(const fs::path& p) const { return costate::test::slurp(p); }

  fs::path dir_;
};

struct Identity {
  ino_t inode = 0;
  std::string bytes;
};

Identity identity(const fs::path& p) {
  struct stat st{};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return {st.st_ino, costate::test::slurp(p)};
}

using costate::test::read_status;

/// The lines of `text` without their '\n'.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t at = 0;
  for (std::size_t end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(text.substr(at, end - at));
  if (at < text.size()) lines.push_back(text.substr(at));
  return lines;
}

bool has_partial_files(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().string().ends_with(".partial")) return true;
  return false;
}

TEST_F(OutputFilesTest, OutputNamingTheInputIsRefusedAndTheInputKept) {
  const Identity before = identity(dir_ / "lv.yaml");
  for (const std::string& name : {std::string("lv.yaml"), std::string("./lv.yaml"),
                                  (dir_ / "lv.yaml").string()}) {
    const Result r = run("run lv.yaml -q -o '" + name + "'");
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("same file as the run's input"), std::string::npos) << r.err;
  }
  // A hard link is the same file under another name.
  fs::create_hard_link(dir_ / "lv.yaml", dir_ / "alias.h5");
  const Result r = run("run lv.yaml -q -o alias.h5");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("same file as the run's input"), std::string::npos) << r.err;
  const Identity after = identity(dir_ / "lv.yaml");
  EXPECT_EQ(after.inode, before.inode);
  EXPECT_EQ(after.bytes, before.bytes);
}

TEST_F(OutputFilesTest, DirectoriesFifosDevicesAndSocketsAreRefused) {
  fs::create_directory(dir_ / "folder.h5");
  ASSERT_EQ(::mkfifo((dir_ / "pipe.h5").c_str(), 0644), 0);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock_path = (dir_ / "sock.h5").string();
  ASSERT_LT(sock_path.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock_path.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  struct Case {
    std::string path, kind;
  };
  for (const Case& c : {Case{"folder.h5", "a directory"}, Case{"pipe.h5", "a FIFO"},
                        Case{"sock.h5", "a socket"}, Case{"/dev/null", "a character device"},
                        Case{"/dev/full", "a character device"}}) {
    const Result r = run("run lv.yaml -q -o " + c.path);
    EXPECT_EQ(r.code, 1) << c.path << ": " << r.err;
    EXPECT_NE(r.err.find(c.path + ": the output is " + c.kind), std::string::npos) << r.err;
  }
  ::close(sock);
  EXPECT_TRUE(fs::is_directory(dir_ / "folder.h5"));
  EXPECT_TRUE(fs::is_fifo(dir_ / "pipe.h5"));
  EXPECT_TRUE(fs::is_socket(dir_ / "sock.h5"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  EXPECT_FALSE(has_partial_files(dir_));
}

TEST_F(OutputFilesTest, SymbolicLinksAreFollowedAndKept) {
  fs::create_directory(dir_ / "results");
  std::ofstream(dir_ / "results" / "real.h5") << "previous contents";
  fs::create_symlink("results/real.h5", dir_ / "link.h5");
  const Result r = run("run lv.yaml -q -o link.h5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.h5"));
  EXPECT_EQ(fs::read_symlink(dir_ / "link.h5"), fs::path("results/real.h5"));
  EXPECT_EQ(read_status(dir_ / "results" / "real.h5"), "complete");
  EXPECT_FALSE(has_partial_files(dir_ / "results"));
  // A link to nowhere is refused: there is no file to replace.
  fs::create_symlink("results/missing/x.h5", dir_ / "dangling.h5");
  const Result d = run("run lv.yaml -q -o dangling.h5");
  EXPECT_EQ(d.code, 1) << d.err;
  EXPECT_NE(d.err.find("symbolic link whose target cannot be resolved"), std::string::npos) << d.err;
  EXPECT_TRUE(fs::is_symlink(dir_ / "dangling.h5"));
}

TEST_F(OutputFilesTest, FailedWriteLeavesThePreviousFileIntact) {
  ASSERT_EQ(run("run lv.yaml -q -o out.h5").code, 0);
  const Identity before = identity(dir_ / "out.h5");
  // A file-size limit of 2 KiB (SIGXFSZ ignored, so writes fail with EFBIG)
  // makes the HDF5 write fail part way, as a full disk does.
  const Result r = run("run lv.yaml -q -o out.h5", "ulimit -f 4; trap '' XFSZ;");
  EXPECT_EQ(r.code, 1) << r.err;  // an error, not a crash at exit
  EXPECT_NE(r.err.find("out.h5: cannot write the output"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;  // the system's reason
  EXPECT_NE(r.err.find("the previous file is left as it was"), std::string::npos) << r.err;
  const Identity after = identity(dir_ / "out.h5");
  EXPECT_EQ(after.inode, before.inode);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(read_status(dir_ / "out.h5"), "complete");
  EXPECT_FALSE(has_partial_files(dir_));
}

TEST_F(OutputFilesTest, DiskFullOnASmallTmpfsFailsCleanly) {
  const fs::path mnt = dir_ / "small";
  fs::create_directory(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=48k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno)
                 << "): needs root or CAP_SYS_ADMIN";
  std::ofstream(mnt / "out.h5") << "previous result";
  // 20 000 output times of two states: ~320 KB, far more than 48 KiB.
  const Result r = run("run lv.yaml -q -o small/out.h5 --set time.output_every=0.0005");
  const Identity after = identity(mnt / "out.h5");
  const bool partial_left = has_partial_files(mnt);
  ::umount(mnt.c_str());
  EXPECT_EQ(r.code, 1) << r.err;  // an error, not a crash at exit
  EXPECT_NE(r.err.find("small/out.h5: cannot write the output"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  EXPECT_EQ(after.bytes, "previous result");
  EXPECT_FALSE(partial_left);
}

TEST_F(OutputFilesTest, ASecondWriterOfTheSameOutputIsRefused) {
  // Hold the lock a running costate holds on its temporary file.
  const fs::path tmp = dir_ / "out.h5.partial";
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  struct flock lock{};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  ASSERT_EQ(::fcntl(fd, F_OFD_SETLK, &lock), 0);
  const Result r = run("run lv.yaml -q -o out.h5");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("another process is writing this output"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(tmp));  // the other writer's file is not touched
  ::close(fd);
  EXPECT_FALSE(fs::exists(dir_ / "out.h5"));
  // Once it is released, the next run writes (over a stale temporary file).
  const Result ok = run("run lv.yaml -q -o out.h5");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(read_status(dir_ / "out.h5"), "complete");
  EXPECT_FALSE(fs::exists(tmp));
}

TEST_F(OutputFilesTest, JsonOnAFullStdoutIsAnError) {
  const std::string cmd = "cd '" + dir_.string() + "' && '" COSTATE_EXE
                          "' run lv.yaml -q --json > /dev/full 2> stderr.txt";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string err = slurp(dir_ / "stderr.txt");
  EXPECT_NE(err.find("cannot write the result to standard output: No space left on device"),
            std::string::npos)
      << err;
}

TEST_F(OutputFilesTest, TextExtensionsWriteThatFormatOrAreRefusedByName) {
  const Result csv = run("run lv.yaml -q -o out.csv");
  ASSERT_EQ(csv.code, 0) << csv.err;
  const std::string text = slurp(dir_ / "out.csv");
  // header + 3 provenance lines + 21 output times
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 25);
  const std::vector<std::string> lines = lines_of(text);
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[0], "t,x,y");
  const Result tsv = run("run lv.yaml -q -o out.tsv");
  ASSERT_EQ(tsv.code, 0) << tsv.err;
  const std::string tsv_text = slurp(dir_ / "out.tsv");
  EXPECT_EQ(tsv_text.substr(0, 6), "t\tx\ty\n");
  // The provenance lines follow the header (the same in both formats).
  EXPECT_EQ(tsv_text.substr(6, 3), "# c");
  // The first data row is the initial state, exactly.
  EXPECT_EQ(lines[4], "0,1,1");
  for (const char* name : {"out.json", "out.txt", "out.yaml"}) {
    const Result r = run(std::string("run lv.yaml -q -o ") + name);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find(std::string(name) + ": costate run writes HDF5"), std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(dir_ / name));
  }
}

// A table carries what an HDF5 file carries (issue 36, deliver 3): after
// its header, '# costate <version>' (the version `costate --version` prints),
// '# command: run' (the HDF5 attribute 'command') and '# settings: ' with the
// resolved settings of /settings on one line, the data file's noise model
// included; costate reads the table back as data.
TEST_F(OutputFilesTest, TablesCarryVersionCommandAndSettingsAndReadBackAsData) {
  const Result version = run("--version");
  ASSERT_EQ(version.code, 0) << version.err;
  std::string v = version.out;
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  ASSERT_EQ(v.rfind("costate ", 0), 0u) << v;
  ASSERT_EQ(run("run lv.yaml -q -o truth.csv").code, 0);
  // The same model against the table it wrote, with a noise model.
  std::ofstream(dir_ / "back.yaml") << kInput
                                    << "objective: {data: {file: truth.csv, noise: {x: 0.1, y: 0.2}}}\n";
  for (const char* name : {"back.csv", "back.tsv"}) {
    const Result r = run(std::string("run back.yaml -q -o ") + name);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<std::string> lines = lines_of(slurp(dir_ / name));
    ASSERT_GE(lines.size(), 5u);
    EXPECT_EQ(lines[1], "# " + v) << name;
    EXPECT_EQ(lines[2], "# command: run") << name;
    const std::string& settings = lines[3];
    EXPECT_EQ(settings.rfind("# settings: {", 0), 0u) << settings;
    EXPECT_EQ(settings.back(), '}') << settings;
    for (const char* part : {"integrator: {method: dopri5, rtol: 1e-08, atol: 1e-10",
                             "parameters: {alpha: 1.5, beta: 1, gamma: 3, delta: 1}",
                             "noise: {x: 0.10000000000000001, y: 0.20000000000000001}",
                             "outputs: [0, 0.5, 1, 1.5, 2,"})
      EXPECT_NE(settings.find(part), std::string::npos) << part << " in " << settings;
    EXPECT_EQ(lines[4].substr(0, 6), std::string(name).ends_with(".csv") ? "0,1,1" : "0\t1\t1");
  }
  // Read back: at the parameters that made the table, the misfit is the
  // difference of two dopri5 runs at rtol 1e-8 whose steps differ (the
  // adjoint run steps to the data times): residuals ≲ 1e-6, J ≲ 21·(1e-6/0.1)²
  // = 2e-9. Another alpha misses the rows by O(0.1..1): J > 10. An ignored
  // table would give neither (no rows: refused; a shifted row: J ≫ 0).
  const Result same = run("sensitivity back.yaml -q --json");
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_LT(nlohmann::json::parse(same.out)["objective"].get<double>(), 2e-9) << same.out;
  const Result other = run("sensitivity back.yaml -q --json --set parameters.alpha=1.6");
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_GT(nlohmann::json::parse(other.out)["objective"].get<double>(), 10.0) << other.out;
}

}  // namespace

// The error that ended a Python program, read from its standard error, and
// the warnings of training frameworks there that explain a failed restore.
//
// A crashed program's last stderr line is rarely its error: torch and NCCL
// print warnings at exit, Open MPI a banner, wandb its summary. What ended
// it is the exception of the last Python traceback:
//
//   Traceback (most recent call last):             (or no header: a tail cut
//     File "/home/u/train.py", line 88, in load_state     before it, a
//       torch.set_rng_state(state)                        SyntaxError)
//       ^^^^^^^^^^^^^^^^^^^^^^^^^^                  (3.11+ carets, skipped)
//     [Previous line repeated 996 more times]      (skipped)
//   TypeError: RNG state must be a torch.ByteTensor    (type: message;
//       more lines of it, indented                      a bare KeyboardInterrupt)
//
// of a chain ("The above exception was the direct cause of the following
// exception:", "During handling of the above exception, ..."), the last
// one; of an exception group ("  + Exception Group Traceback", "  | "
// lines), its first sub-exception; of a DataLoader worker's error
// ("Original Traceback (most recent call last):") and of mp.spawn's child
// ("-- Process 1 terminated with the following error:"), the child's, with
// the process index as its rank. Lines may carry the prefixes torch and
// its launchers add, "[rank3]: " (torch's own, per line of a traceback),
// "[default0]:" (torchrun --tee), doubled or not: the prefix names the
// rank, and the ranks' lines are read apart, so interleaved ranks do not
// mix. With several ranks' tracebacks in one text the error is that of the
// rank whose final traceback began first (the first to fail); torchrun's
// own ChildFailedError is resolved to its table's "Root Cause (first
// observed failure)": the traceback the table holds (@record's error
// file), else that rank's own lines, else the first traceback printed
// before torchrun's, else the table's exit code or signal.
//
// Without a Python traceback: a C++ exception nothing caught ("terminate
// called after throwing an instance of 'c10::Error'", "  what():  ...",
// "Exception raised from F at FILE:LINE") and faulthandler's "Fatal Python
// error: Segmentation fault" with its current thread's innermost frame.
//
// Texts of any bytes are taken: a latin-1 byte, a NUL, a 16 KiB line. What
// comes back is valid UTF-8, cut on character boundaries (message at
// kMaxErrorText bytes).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pilot {

// The longest message, file and source line kept (bytes, then "...").
inline constexpr size_t kMaxErrorText = 300;

struct PythonError {
  enum class Kind {
    kException,     // a Python traceback's exception
    kCxxException,  // "terminate called after throwing an instance of 'T'"
    kFatal,         // faulthandler's "Fatal Python error: ..."
  };
  Kind kind = Kind::kException;
  std::string type;     // "TypeError", "torch.OutOfMemoryError", "c10::Error",
                        // "Fatal Python error"
  std::string message;  // one line (continuation lines joined by a space); may be ""
  // Where it was raised: the innermost frame (for a C++ exception, the
  // "Exception raised from" source location); file "" when none was printed.
  std::string file;
  int64_t line = 0;
  std::string function;  // "" when the frame names none (a SyntaxError's)
  std::string source;    // the frame's source line as printed, trimmed; may be ""
  // When that frame is in an installed package or Python's own library
  // (site-packages, dist-packages, lib/python3.X, <frozen ...>): the
  // innermost frame of the program's own files that led there; "" when the
  // innermost frame is the program's, or no frame is.
  std::string caller_file;
  int64_t caller_line = 0;
  std::string caller_function;
  // The rank the text names: "[rank3]:", torchrun's "[default3]:" (a local
  // rank), mp.spawn's process index, torchrun's table's rank.
  std::optional<int> rank;
};

// The error that ended the program whose standard error (or its tail) is
// `text`; nullopt when the text holds none of the above.
std::optional<PythonError> ParsePythonError(std::string_view text);

// The same for task `task` of an `srun --label` step of `tasks` tasks, from
// that task's own lines of the step's stream (core/records/srun_lines.h);
// its rank is the task's unless the lines name another.
std::optional<PythonError> ParsePythonErrorOfSrunTask(std::string_view text, int task, int tasks);

// "TypeError: RNG state must be a torch.ByteTensor (at /home/u/train.py:88
// in load_state)"; raised in a library, "... (at .../torch/random.py:18 in
// set_rng_state, from /home/u/train.py:88 in load_state)"; without a
// message "KeyboardInterrupt (at ...)", without a file no parenthesis.
std::string DescribePythonError(const PythonError& e);

// Whether the error is an allocator's failure: torch.OutOfMemoryError,
// torch.cuda.OutOfMemoryError, MemoryError, std::bad_alloc, or a message
// that says so ("CUDA out of memory", "can't allocate memory", ...).
bool IsOutOfMemoryError(const PythonError& e);

// What known warnings of training frameworks in `text` say about a restore,
// each once, in the table's order ("hint: the model's checkpoint lacked
// keys: ..."); empty when none. The table (python_error.cc, kStderrHints)
// holds only warnings whose wording the frameworks print, and never their
// noise (torch's "destroy_process_group() was not called").
std::vector<std::string> StderrHints(std::string_view text);

}  // namespace pilot

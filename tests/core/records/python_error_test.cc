// The error that ended a Python program, from its standard error
// (core/records/python_error.h), and the frameworks' warnings that become
// hints (label unit: pure, no torch). The texts are Python 3.11's and
// torch's own output, paths renamed.
#include "core/records/python_error.h"

#include <gtest/gtest.h>

#include <string>

#include "core/base/strings.h"
#include "core/base/utf8.h"
#include "core/records/srun_lines.h"

namespace pilot {
namespace {

PythonError Parsed(std::string_view text) {
  std::optional<PythonError> e = ParsePythonError(text);
  EXPECT_TRUE(e.has_value()) << text;
  return e.value_or(PythonError{});
}

// A resumed process whose RNG state is not a ByteTensor; torch prints its
// exit warning after the traceback.
constexpr std::string_view kResumed = R"py(step 20 restored from /work/ckpt/step-000020
Traceback (most recent call last):
  File "/home/alice/gpt/train.py", line 16, in <module>
    main()
  File "/home/alice/gpt/train.py", line 11, in main
    step = load_state("/work/ckpt/step-000020/state.pt")
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/alice/gpt/train.py", line 6, in load_state
    torch.set_rng_state(state["rng"])
  File "/home/alice/venv/lib/python3.11/site-packages/torch/random.py", line 18, in set_rng_state
    default_generator.set_state(new_state)
TypeError: RNG state must be a torch.ByteTensor
[rank0]:[W1204 10:31:07.412893513 ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())
)py";

TEST(PythonError, TheExceptionNotTheWarningAfterIt) {
  const PythonError e = Parsed(kResumed);
  EXPECT_EQ(e.kind, PythonError::Kind::kException);
  EXPECT_EQ(e.type, "TypeError");
  EXPECT_EQ(e.message, "RNG state must be a torch.ByteTensor");
  EXPECT_EQ(e.file, "/home/alice/venv/lib/python3.11/site-packages/torch/random.py");
  EXPECT_EQ(e.line, 18);
  EXPECT_EQ(e.function, "set_rng_state");
  EXPECT_EQ(e.source, "default_generator.set_state(new_state)");
  // Raised in torch: the program's own innermost frame that called it.
  EXPECT_EQ(e.caller_file, "/home/alice/gpt/train.py");
  EXPECT_EQ(e.caller_line, 6);
  EXPECT_EQ(e.caller_function, "load_state");
  EXPECT_EQ(e.rank, std::nullopt);
  EXPECT_EQ(DescribePythonError(e),
            "TypeError: RNG state must be a torch.ByteTensor (at "
            "/home/alice/venv/lib/python3.11/site-packages/torch/random.py:18 in set_rng_state, "
            "from /home/alice/gpt/train.py:6 in load_state)");
  EXPECT_TRUE(StderrHints(kResumed).empty()) << "torch's exit warning is noise, not a hint";
}

TEST(PythonError, TheLastOfAChain) {
  const PythonError e = Parsed(R"py(Traceback (most recent call last):
  File "/home/alice/gpt/resume.py", line 4, in read
    with open(path) as f:
         ^^^^^^^^^^
FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/state.json'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/home/alice/gpt/resume.py", line 10, in resume
    read("/nonexistent/state.json")
  File "/home/alice/gpt/resume.py", line 7, in read
    raise RuntimeError(f"no checkpoint at {path}") from e
RuntimeError: no checkpoint at /nonexistent/state.json

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/home/alice/gpt/resume.py", line 13, in <module>
    resume()
  File "/home/alice/gpt/resume.py", line 12, in resume
    x = {}["step"]
        ~~^^^^^^^^
KeyError: 'step'
)py");
  EXPECT_EQ(DescribePythonError(e), "KeyError: 'step' (at /home/alice/gpt/resume.py:12 in resume)");
  EXPECT_EQ(e.source, "x = {}[\"step\"]");
  EXPECT_EQ(e.caller_file, "");
}

TEST(PythonError, CaretLinesAreNotSource) {
  const PythonError e = Parsed(R"py(Traceback (most recent call last):
  File "/home/alice/gpt/build.py", line 7, in <module>
    build({"a": {}})
  File "/home/alice/gpt/build.py", line 6, in build
    return [d["a"]["b"] for _ in range(3)]
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/alice/gpt/build.py", line 6, in <listcomp>
    return [d["a"]["b"] for _ in range(3)]
            ~~~~~~^^^^^
KeyError: 'b'
)py");
  EXPECT_EQ(e.function, "<listcomp>");
  EXPECT_EQ(e.source, "return [d[\"a\"][\"b\"] for _ in range(3)]");
}

TEST(PythonError, RepeatedLinesAndAMessageOfSeveralLines) {
  const PythonError r = Parsed(R"py(Traceback (most recent call last):
  File "/home/alice/gpt/deep.py", line 4, in <module>
  File "/home/alice/gpt/deep.py", line 3, in f
  File "/home/alice/gpt/deep.py", line 3, in f
  File "/home/alice/gpt/deep.py", line 3, in f
  [Previous line repeated 996 more times]
RecursionError: maximum recursion depth exceeded
)py");
  EXPECT_EQ(DescribePythonError(r),
            "RecursionError: maximum recursion depth exceeded (at /home/alice/gpt/deep.py:3 in f)");
  // Indented lines continue the message; a note (add_note) and what
  // follows do not.
  const PythonError m = Parsed(R"py(Traceback (most recent call last):
  File "/home/alice/gpt/ckpt.py", line 7, in <module>
    restore(40)
  File "/home/alice/gpt/ckpt.py", line 6, in restore
    raise e
CheckpointError: step 40: missing optimizer state
)py"
                               "\t"
                               R"py(keys: exp_avg, exp_avg_sq
saved by an older version
wandb: Find logs at: ./wandb/run-20261204_103107-3kq1x9/logs
)py");
  EXPECT_EQ(m.type, "CheckpointError");
  EXPECT_EQ(m.message, "step 40: missing optimizer state keys: exp_avg, exp_avg_sq");
}

TEST(PythonError, BareExceptionsAndModulePaths) {
  const PythonError k = Parsed(R"py(Traceback (most recent call last):
  File "/home/alice/gpt/loop.py", line 4, in <module>
    loop()
  File "/home/alice/gpt/loop.py", line 3, in loop
    raise KeyboardInterrupt
KeyboardInterrupt
)py");
  EXPECT_EQ(k.type, "KeyboardInterrupt");
  EXPECT_EQ(k.message, "");
  EXPECT_EQ(DescribePythonError(k), "KeyboardInterrupt (at /home/alice/gpt/loop.py:3 in loop)");
  const PythonError s = Parsed(
      "Traceback (most recent call last):\n"
      "  File \"/home/alice/gpt/run.py\", line 9, in <module>\n"
      "    sys.exit(main())\nSystemExit: 3\n");
  EXPECT_EQ(DescribePythonError(s), "SystemExit: 3 (at /home/alice/gpt/run.py:9 in <module>)");
  const PythonError o = Parsed(
      "Traceback (most recent call last):\n  File \"/home/alice/gpt/train.py\", line 52, in step\n"
      "    loss.backward()\n"
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
      "capacity of 79.10 GiB of which 1.06 GiB is free.\n");
  EXPECT_EQ(o.type, "torch.OutOfMemoryError");
  EXPECT_TRUE(IsOutOfMemoryError(o));
  EXPECT_EQ(Parsed("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"
                   "__main__.ShardError: shard 3\n")
                .type,
            "__main__.ShardError");
}

// A SyntaxError in the main file has no header, only its frame.
TEST(PythonError, ASyntaxErrorsFrameWithoutAHeader) {
  const PythonError e = Parsed(R"py(  File "/home/alice/gpt/train.py", line 1
    def f(:
          ^
SyntaxError: invalid syntax
)py");
  EXPECT_EQ(DescribePythonError(e), "SyntaxError: invalid syntax (at /home/alice/gpt/train.py:1)");
  EXPECT_EQ(e.source, "def f(:");
}

// A deep traceback whose start the supervisor's 16 KiB tail cut off (in a
// frame, in a character): its frames and exception are still read.
TEST(PythonError, ATailCutInsideALongTraceback) {
  std::string text =
      "Traceback (most recent call last):\n"
      "  File \"/home/alice/gpt/deep.py\", line 5, in <module>\n    f(0)\n";
  for (int i = 0; i < 500; ++i) {
    text +=
        "  File \"/home/alice/gpt/deep.py\", line 2, in f\n    return g(n + 1)  # \xC3\xA9tape\n"
        "           ^^^^^^^^\n"
        "  File \"/home/alice/gpt/deep.py\", line 4, in g\n    return f(n + 1)\n"
        "           ^^^^^^^^\n";
  }
  text += "RecursionError: maximum recursion depth exceeded\n";
  ASSERT_GT(text.size(), 32u * 1024);
  for (size_t cut : {size_t{16 * 1024}, size_t{16 * 1024 + 37}, size_t{16 * 1024 + 60}}) {
    const std::string tail = text.substr(text.size() - cut);
    const PythonError e = Parsed(tail);
    EXPECT_EQ(
        DescribePythonError(e),
        "RecursionError: maximum recursion depth exceeded (at /home/alice/gpt/deep.py:4 in g)")
        << cut;
  }
}

TEST(PythonError, AnExceptionGroupsFirstSubException) {
  const PythonError e = Parsed(R"py(  + Exception Group Traceback (most recent call last):
  |   File "/home/alice/gpt/shards.py", line 11, in <module>
  |     main()
  |   File "/home/alice/gpt/shards.py", line 10, in main
  |     raise ExceptionGroup("loading shards failed", errors)
  | ExceptionGroup: loading shards failed (2 sub-exceptions)
  +-+---------------- 1 ----------------
    | Traceback (most recent call last):
    |   File "/home/alice/gpt/shards.py", line 7, in main
    |     load(i)
    |   File "/home/alice/gpt/shards.py", line 2, in load
    |     raise ValueError(f"shard {i} is truncated")
    | ValueError: shard 0 is truncated
    +---------------- 2 ----------------
    | Traceback (most recent call last):
    |   File "/home/alice/gpt/shards.py", line 7, in main
    |     load(i)
    |   File "/home/alice/gpt/shards.py", line 2, in load
    |     raise ValueError(f"shard {i} is truncated")
    | ValueError: shard 1 is truncated
    +------------------------------------
)py");
  EXPECT_EQ(DescribePythonError(e),
            "ValueError: shard 0 is truncated (at /home/alice/gpt/shards.py:2 in load)");
}

// A group within a group, chained; its sub-exceptions never raised stand
// where the inner group was raised.
TEST(PythonError, NestedAndChainedGroups) {
  const PythonError e = Parsed(R"py(  + Exception Group Traceback (most recent call last):
  |   File "/home/alice/gpt/nested.py", line 5, in outer
  |     inner()
  |   File "/home/alice/gpt/nested.py", line 2, in inner
  |     raise ExceptionGroup("inner", [ValueError("x"), KeyError("k")])
  | ExceptionGroup: inner (2 sub-exceptions)
  +-+---------------- 1 ----------------
    | ValueError: x
    +---------------- 2 ----------------
    | KeyError: 'k'
    +------------------------------------

During handling of the above exception, another exception occurred:

  + Exception Group Traceback (most recent call last):
  |   File "/home/alice/gpt/nested.py", line 8, in <module>
  |     outer()
  |   File "/home/alice/gpt/nested.py", line 7, in outer
  |     raise ExceptionGroup("outer", [g, TypeError("t")])
  | ExceptionGroup: outer (2 sub-exceptions)
  +-+---------------- 1 ----------------
    | Exception Group Traceback (most recent call last):
    |   File "/home/alice/gpt/nested.py", line 5, in outer
    |     inner()
    |   File "/home/alice/gpt/nested.py", line 2, in inner
    |     raise ExceptionGroup("inner", [ValueError("x"), KeyError("k")])
    | ExceptionGroup: inner (2 sub-exceptions)
    +-+---------------- 1 ----------------
      | ValueError: x
      +---------------- 2 ----------------
      | KeyError: 'k'
      +------------------------------------
    +---------------- 2 ----------------
    | TypeError: t
    +------------------------------------
)py");
  EXPECT_EQ(DescribePythonError(e), "ValueError: x (at /home/alice/gpt/nested.py:2 in inner)");

  // except* re-raising: a group printed without a traceback, whose first
  // sub-exception is a chain ending in the RuntimeError.
  const PythonError c = Parsed(R"py(  | ExceptionGroup:  (1 sub-exception)
  +-+---------------- 1 ----------------
    | Exception Group Traceback (most recent call last):
    |   File "/home/alice/gpt/load.py", line 8, in <module>
    |     asyncio.run(main())
    |   File "/usr/lib/python3.11/asyncio/runners.py", line 190, in run
    |     return runner.run(main)
    |            ^^^^^^^^^^^^^^^^
    |   File "/home/alice/gpt/load.py", line 5, in main
    |     async with asyncio.TaskGroup() as tg:
    |   File "/usr/lib/python3.11/asyncio/taskgroups.py", line 133, in __aexit__
    |     raise me from None
    | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)
    +-+---------------- 1 ----------------
      | Traceback (most recent call last):
      |   File "/home/alice/gpt/load.py", line 3, in load
      |     raise OSError(f"shard {i}: disk quota exceeded")
      | OSError: shard 0: disk quota exceeded
      +------------------------------------
    | 
    | The above exception was the direct cause of the following exception:
    | 
    | Traceback (most recent call last):
    |   File "/home/alice/gpt/load.py", line 10, in <module>
    |     raise RuntimeError("loading failed") from e
    | RuntimeError: loading failed
    +------------------------------------
)py");
  EXPECT_EQ(DescribePythonError(c),
            "RuntimeError: loading failed (at /home/alice/gpt/load.py:10 in <module>)");
}

TEST(PythonError, MpSpawnsChildAndItsIndex) {
  const PythonError e = Parsed(R"py(Traceback (most recent call last):
  File "/home/alice/gpt/spawn.py", line 7, in <module>
    mp.spawn(worker, nprocs=2)
  File "/home/alice/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 240, in spawn
    return start_processes(fn, args, nprocs, join, daemon, start_method='spawn')
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/alice/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 198, in start_processes
    while not context.join():
              ^^^^^^^^^^^^^^
  File "/home/alice/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 160, in join
    raise ProcessRaisedException(msg, error_index, failed_process.pid)
torch.multiprocessing.spawn.ProcessRaisedException: 

-- Process 1 terminated with the following error:
Traceback (most recent call last):
  File "/home/alice/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 69, in _wrap
    fn(i, *args)
  File "/home/alice/gpt/spawn.py", line 4, in worker
    raise ValueError(f"bad shard {i}")
ValueError: bad shard 1
)py");
  EXPECT_EQ(DescribePythonError(e),
            "ValueError: bad shard 1 (at /home/alice/gpt/spawn.py:4 in worker)");
  EXPECT_EQ(e.rank, 1);
}

// A DataLoader worker's error, raised again in the main process: the
// worker's own.
TEST(PythonError, ADataLoaderWorkersOriginalTraceback) {
  const PythonError e = Parsed(R"py(Traceback (most recent call last):
  File "/home/alice/gpt/data.py", line 14, in <module>
    main()
  File "/home/alice/gpt/data.py", line 11, in main
    for batch in DataLoader(Shards(), batch_size=2, num_workers=1):
  File "/home/alice/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1359, in _process_data
    data.reraise()
  File "/home/alice/venv/lib/python3.11/site-packages/torch/_utils.py", line 543, in reraise
    raise exception
IndexError: Caught IndexError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File "/home/alice/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py", line 302, in _worker_loop
    data = fetcher.fetch(index)
           ^^^^^^^^^^^^^^^^^^^^
  File "/home/alice/gpt/data.py", line 8, in __getitem__
    raise IndexError(f"sample {i} is out of the shard")
IndexError: sample 3 is out of the shard
)py");
  EXPECT_EQ(
      DescribePythonError(e),
      "IndexError: sample 3 is out of the shard (at /home/alice/gpt/data.py:8 in __getitem__)");
}

// torch prefixes each line of a rank's traceback; two ranks interleave in
// one stream, the first to fail is rank 1. Blank lines come unprefixed; a
// progress bar leaves no newline before a header; a prefix may be doubled.
TEST(PythonError, TorchRankPrefixesAndTheFirstRankToFail) {
  constexpr std::string_view kTwoRanks =
      R"py(  0%|          | 0/1400 [00:00<?, ?it/s][rank1]: Traceback (most recent call last):
[rank1]:   File "/home/alice/gpt/train.py", line 88, in <module>
[rank1]:     main()
[rank0]: Traceback (most recent call last):
[rank1]:   File "/home/alice/gpt/train.py", line 61, in main
[rank0]:   File "/home/alice/gpt/train.py", line 88, in <module>
[rank1]:     batch = next(loader)
[rank1]:             ^^^^^^^^^^^^
[rank0]:     main()
[rank1]: StopIteration

[rank1]: The above exception was the direct cause of the following exception:

[rank1]: Traceback (most recent call last):
[rank1]:   File "/home/alice/gpt/train.py", line 63, in main
[rank1]:     raise RuntimeError("shard 1 ran out of batches at step 41")
[rank1]: RuntimeError: shard 1 ran out of batches at step 41
[rank0]:   File "/home/alice/gpt/train.py", line 70, in main
[rank0]:     dist.all_reduce(loss)
[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.2]:5921
[rank0]:[W1204 10:31:07.412893513 ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources.
)py";
  const PythonError e = Parsed(kTwoRanks);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(
      DescribePythonError(e),
      "RuntimeError: shard 1 ran out of batches at step 41 (at /home/alice/gpt/train.py:63 in "
      "main)");

  const PythonError d = Parsed(R"py([rank1]: [rank1]: Traceback (most recent call last):
[rank1]: [rank1]:   File "/home/alice/gpt/fit.py", line 79, in <module>
[rank1]: [rank1]:     main()
[rank1]: [rank1]: ValueError: bad batch
)py");
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.type, "ValueError");
  EXPECT_EQ(d.line, 79);

  // A rank's prefixed traceback stands before an unprefixed one the same
  // process printed at exit.
  std::string rank0;
  for (std::string_view line : SplitLines(kTwoRanks)) {
    if (line.substr(0, 8) == "[rank0]:") rank0 += std::string(line) + "\n";
  }
  const PythonError p = Parsed(rank0 +
                               "Exception ignored in atexit callback: <function _exit at 0x7f3a>\n"
                               "Traceback (most recent call last):\n"
                               "  File \"/home/alice/gpt/log.py\", line 3, in _exit\n"
                               "OSError: [Errno 5] Input/output error\n");
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.message,
            "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
            "[10.0.0.2]:5921");
}

// torchrun --tee: "[default0]:" before each line of local rank 0.
TEST(PythonError, TorchrunsLogPrefix) {
  const PythonError e = Parsed(R"py([default0]:Traceback (most recent call last):
[default0]:  File "/home/alice/gpt/train.py", line 40, in <module>
[default0]:    batch = next(it)
[default0]:ValueError: batch of 0 rows
[default0]:wandb: Find logs at: ./wandb/run-20261204_103107-3kq1x9/logs
)py");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(DescribePythonError(e),
            "ValueError: batch of 0 rows (at /home/alice/gpt/train.py:40 in <module>)");
}

// One srun --label step: each task's lines apart, without their labels.
TEST(PythonError, AnSrunTasksOwnLines) {
  constexpr std::string_view kStep = R"py(0: Traceback (most recent call last):
1: Traceback (most recent call last):
0:   File "/home/alice/gpt/train.py", line 70, in main
1:   File "/home/alice/gpt/train.py", line 52, in main
0:     dist.all_reduce(loss)
1:     loss.backward()
1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
0: RuntimeError: Connection closed by peer [10.0.0.2]:5921
srun: error: pn2: task 1: Exited with exit code 1
srun: error: pn1: task 0: Exited with exit code 1
)py";
  EXPECT_EQ(SrunTaskText(kStep, 1, 2).substr(0, 37), "Traceback (most recent call last):\n  ");
  std::optional<PythonError> one = ParsePythonErrorOfSrunTask(kStep, 1, 2);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->rank, 1);
  EXPECT_EQ(one->type, "torch.OutOfMemoryError");
  EXPECT_EQ(one->line, 52);
  std::optional<PythonError> zero = ParsePythonErrorOfSrunTask(kStep, 0, 2);
  ASSERT_TRUE(zero.has_value());
  EXPECT_EQ(zero->rank, 0);
  EXPECT_EQ(zero->type, "RuntimeError");
  EXPECT_FALSE(ParsePythonErrorOfSrunTask(kStep, 2, 4).has_value());
}

// torchrun's agent: its table's root cause, the traceback @record kept.
constexpr std::string_view kChildFailed = R"py(Traceback (most recent call last):
  File "/home/alice/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/home/alice/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 346, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "/home/alice/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 246, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[0]:
  time      : 2026-12-04_10:31:20
  host      : gpu01
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 41821)
  error_file: /tmp/torchelastic_x1/none_0/attempt_0/0/error.json
  traceback : Traceback (most recent call last):
    File "/home/alice/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 346, in wrapper
      return f(*args, **kwargs)
             ^^^^^^^^^^^^^^^^^^
    File "/home/alice/gpt/train.py", line 10, in main
      dist.all_reduce(loss)
  RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.2]:5921
  
------------------------------------------------------------
Root Cause (first observed failure):
[1]:
  time      : 2026-12-04_10:31:18
  host      : gpu01
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 41822)
  error_file: /tmp/torchelastic_x1/none_0/attempt_0/1/error.json
  traceback : Traceback (most recent call last):
    File "/home/alice/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 346, in wrapper
      return f(*args, **kwargs)
             ^^^^^^^^^^^^^^^^^^
    File "/home/alice/gpt/train.py", line 9, in main
      load("/data/shard-00001.bin")
    File "/home/alice/gpt/train.py", line 4, in load
      raise FileNotFoundError(2, "No such file or directory", path)
  FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-00001.bin'
  
============================================================
)py";

TEST(PythonError, TorchrunsRootCauseFromItsTable) {
  const PythonError e = Parsed(kChildFailed);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(DescribePythonError(e),
            "FileNotFoundError: [Errno 2] No such file or directory: '/data/shard-00001.bin' (at "
            "/home/alice/gpt/train.py:4 in load)");
}

// Without @record the table has no traceback: the root cause's rank's own
// lines, else the first traceback torchrun's stream shows before its own,
// else what the table says.
TEST(PythonError, TorchrunsRootCauseWithoutItsTraceback) {
  std::string table(kChildFailed);
  const size_t root = table.find("Root Cause");
  const size_t tb = table.find("  traceback : Traceback", root);
  table =
      table.substr(0, tb) +
      "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
      "============================================================\n";
  const std::string rank1 =
      "[rank1]: Traceback (most recent call last):\n"
      "[rank1]:   File \"/home/alice/gpt/train.py\", line 4, in load\n"
      "[rank1]: FileNotFoundError: /data/shard-00001.bin\n";
  const std::string rank0 =
      "[rank0]: Traceback (most recent call last):\n"
      "[rank0]:   File \"/home/alice/gpt/train.py\", line 10, in main\n"
      "[rank0]: RuntimeError: Connection closed by peer\n";
  // rank 0's traceback printed first, yet the table names rank 1.
  const PythonError prefixed =
      Parsed(rank0 + rank1 + "W1204 torch.distributed.elastic: failed\n" + table);
  EXPECT_EQ(prefixed.rank, 1);
  EXPECT_EQ(prefixed.message, "/data/shard-00001.bin");

  std::string plain = rank1 + rank0;
  for (size_t at; (at = plain.find("[rank")) != std::string::npos;) plain.erase(at, 9);
  const PythonError unprefixed = Parsed(plain + table);
  EXPECT_EQ(unprefixed.rank, 1);
  EXPECT_EQ(DescribePythonError(unprefixed),
            "FileNotFoundError: /data/shard-00001.bin (at /home/alice/gpt/train.py:4 in load)");

  std::string killed = table;
  killed.replace(killed.find("To enable"),
                 killed.find('\n', killed.find("To enable")) - killed.find("To enable"),
                 "Signal 9 (SIGKILL) received by PID 41822");
  const size_t code = killed.find("exitcode  : 1", root);
  killed.replace(code, 13, "exitcode  : -9");
  const PythonError k = Parsed(killed);
  EXPECT_EQ(k.rank, 1);
  EXPECT_EQ(DescribePythonError(k),
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: rank 1 exited with "
            "exitcode -9: Signal 9 (SIGKILL) received by PID 41822");
}

// What launchers and loggers print after the traceback is not the error.
TEST(PythonError, BannersAndLoggersAfterTheTraceback) {
  const PythonError e = Parsed(R"py(Traceback (most recent call last):
  File "/home/alice/gpt/train.py", line 40, in <module>
    batch = next(it)
ValueError: batch of 0 rows
wandb: 
wandb: 🚀 View run dulcet-sky-12 at: https://wandb.ai/alice/gpt/runs/3kq1x9
wandb: Find logs at: ./wandb/run-20261204_103107-3kq1x9/logs
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[4242,1],0]
  Exit code:    1
--------------------------------------------------------------------------
)py");
  EXPECT_EQ(DescribePythonError(e),
            "ValueError: batch of 0 rows (at /home/alice/gpt/train.py:40 in <module>)");
}

// NCCL's watchdog ends the process from C++; faulthandler, when on, shows
// where Python was.
TEST(PythonError, AnUncaughtCxxException) {
  constexpr std::string_view kWatchdog =
      R"py([rank1]:[E1204 10:41:07.118 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG 0 (default_pg) Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600017 milliseconds before timing out.
Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7fbeb989ef86 in /home/alice/venv/lib/python3.11/site-packages/torch/lib/libc10.so)
frame #1: <unknown function> + 0x94ac3 (0x7fbf2c4b0ac3 in /lib/x86_64-linux-gnu/libc.so.6)
)py";
  const PythonError e = Parsed(kWatchdog);
  EXPECT_EQ(e.kind, PythonError::Kind::kCxxException);
  EXPECT_EQ(e.type, "c10::DistBackendError");
  EXPECT_EQ(e.message.find("[PG 0 (default_pg) Rank 1] Process group watchdog thread terminated"),
            0u);
  EXPECT_EQ(e.file, "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp");
  EXPECT_EQ(e.line, 609);
  EXPECT_EQ(e.function, "checkTimeout");

  const PythonError f = Parsed(std::string(kWatchdog) + R"py(Fatal Python error: Aborted

Current thread 0x00007fbf2c6b9740 (most recent call first):
  File "/home/alice/venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 801 in synchronize
  File "/home/alice/gpt/train.py", line 71 in main
  File "/home/alice/gpt/train.py", line 88 in <module>
)py");
  EXPECT_EQ(f.type, "c10::DistBackendError");
  EXPECT_EQ(f.function, "synchronize");
  EXPECT_EQ(f.caller_file, "/home/alice/gpt/train.py");
  EXPECT_EQ(f.caller_line, 71);
}

TEST(PythonError, FaulthandlersFatalError) {
  const PythonError e = Parsed(R"py(Fatal Python error: Segmentation fault

Current thread 0x00007f50ce022040 (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/home/alice/gpt/crash.py", line 4 in crash
  File "/home/alice/gpt/crash.py", line 5 in <module>

Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)
)py");
  EXPECT_EQ(e.kind, PythonError::Kind::kFatal);
  EXPECT_EQ(
      DescribePythonError(e),
      "Fatal Python error: Segmentation fault (at /usr/lib/python3.11/ctypes/__init__.py:519 in "
      "string_at, from /home/alice/gpt/crash.py:4 in crash)");
}

TEST(PythonError, NoTracebackIsNoError) {
  EXPECT_FALSE(ParsePythonError(""));
  EXPECT_FALSE(ParsePythonError("Killed\n"));
  EXPECT_FALSE(ParsePythonError("step 3 loss 2.5\nRuntimeError: printed, not raised\n"));
  EXPECT_FALSE(ParsePythonError("Traceback (most recent call last):\n"));
  EXPECT_FALSE(
      ParsePythonError("Traceback (most recent call last):\n  File \"x.py\", line 3, in f\n"));
  EXPECT_FALSE(ParsePythonError("|\n|\n| x\n  +-+-- 1 --\n"));
}

// Bytes that are not text: a NUL, latin-1, a character cut, escapes; a
// message longer than kMaxErrorText is cut on a character boundary.
TEST(PythonError, BinaryBytesAndLongMessages) {
  using namespace std::string_literals;
  const std::string bytes =
      "\x00\xff\xfe garbage \x1b[2J\r\n"
      "Traceback (most recent call last):\n  File \"/home/alice/gpt/caf\xe9.py\", line 3, in f\n"
      "ValueError: caf\xe9 \x00 \xe2\x82\n"s;
  ASSERT_EQ(bytes[0], '\0');
  const PythonError e = Parsed(bytes);
  EXPECT_TRUE(IsValidUtf8(e.file)) << e.file;
  EXPECT_TRUE(IsValidUtf8(e.message)) << e.message;
  EXPECT_EQ(e.line, 3);

  std::string long_message =
      "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"
      "ValueError: ";
  for (int i = 0; i < 200; ++i) long_message += "\xC3\xA9";  // é: two bytes
  const PythonError l = Parsed(long_message + "\n");
  EXPECT_EQ(l.message.size(), kMaxErrorText + 3);
  EXPECT_EQ(l.message.substr(l.message.size() - 3), "...");
  EXPECT_TRUE(IsValidUtf8(l.message));

  std::string noise;
  for (int i = 0; i < 5000; ++i) noise += static_cast<char>((i * 7919) % 256);
  (void)ParsePythonError(noise);
  (void)ParsePythonError(std::string(20000, '|'));
  (void)ParsePythonError(std::string(20000, '\n'));
}

TEST(PythonError, OutOfMemoryByTypeOrWords) {
  PythonError e;
  for (const char* type :
       {"torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError", "MemoryError", "std::bad_alloc"}) {
    e.type = type;
    EXPECT_TRUE(IsOutOfMemoryError(e)) << type;
  }
  e.type = "RuntimeError";
  e.message = "CUDA out of memory. Tried to allocate 20.00 MiB";
  EXPECT_TRUE(IsOutOfMemoryError(e));
  e.message =
      "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory";
  EXPECT_TRUE(IsOutOfMemoryError(e));
  e.message = "'memory'";
  EXPECT_FALSE(IsOutOfMemoryError(e));
  e.type = "KeyError";
  EXPECT_FALSE(IsOutOfMemoryError(e));
}

TEST(StderrHints, TheFrameworksWarningsOnce) {
  const std::string text =
      "/home/alice/venv/lib/python3.11/site-packages/lightning/pytorch/loops/"
      "training_epoch_loop.py:161: "
      "You're resuming from a checkpoint that ended before the epoch ended and your dataloader is "
      "not "
      "resumable. This can cause unreliable results if further training is done.\n"
      "[WARNING|trainer.py:2741] 2026-12-04 10:31:07,412 >> There were missing keys in the "
      "checkpoint "
      "model loaded: ['lm_head.weight'].\n"
      "UserWarning: Found keys that are in the model state dict but not in the checkpoint: "
      "['head.bias']\n";
  const std::vector<std::string> hints = StderrHints(text);
  ASSERT_EQ(hints.size(), 2u);
  EXPECT_EQ(hints[0],
            "hint: the program printed that its data loader cannot resume mid-epoch: the data "
            "position is probably not restored");
  EXPECT_EQ(hints[1],
            "hint: the program printed that keys were missing from the model's checkpoint (expected "
            "for tied weights such as lm_head.weight; any other was not restored)");
  EXPECT_EQ(
      StderrHints("UserWarning: You're resuming from a checkpoint that ended mid-epoch. Training "
                  "will start from the beginning of the next epoch.")
          .size(),
      1u);
  EXPECT_TRUE(
      StderrHints("Some weights of GPT2ForSequenceClassification were not initialized from "
                  "the model checkpoint at gpt2 and are newly initialized: ['score.weight']")
          .empty());
}

}  // namespace
}  // namespace pilot

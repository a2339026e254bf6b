"""The probe's framework integrations, for real where the framework is installed.

slurm_pilot.loop runs a reference and a resumed process with torch (the
records written to a PILOT_METRICS file, as test_probe.py does). The parts
of slurm_pilot.hf and slurm_pilot.lightning that need no framework (the
resume paths, the arguments they set, the callbacks' reporting driven by
the events a Trainer sends) run everywhere; the runs through transformers'
Trainer and Lightning skip, saying so, where the package is not installed.

    PYTHONPATH=python python3 -m unittest -v tests.program.test_integrations
or as a script (exits 77, the skip code, when torch is not importable).
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import torch
except ImportError:
    torch = None
if torch is None:
    if __name__ == "__main__":
        print("torch is not importable: skipped")
        sys.exit(77)
    raise unittest.SkipTest("torch is not importable")

import slurm_pilot  # noqa: E402
import slurm_pilot.hf  # noqa: E402
import slurm_pilot.lightning  # noqa: E402
import slurm_pilot.loop  # noqa: E402
from slurm_pilot import _state  # noqa: E402

sys.path.insert(0, HERE)
from fake_staging import FakeStaging  # noqa: E402

PILOT_VARS = ("PILOT_METRICS", "PILOT_STEPS", "PILOT_CHECKPOINT_STEP", "PILOT_CHECKPOINT_DIR",
              "PILOT_RESUME_DIR", "PILOT_RESUME_STEP", "PILOT_STAGE", "PILOT_PROCESS", "PILOT_DEVICE", "PILOT_SEED",
              "PILOT_SEQ_LEN", "PILOT_MICRO_BATCH", "RANK", "LOCAL_RANK", "WORLD_SIZE",
              "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")


def installed(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def read(path):
    if not os.path.exists(path):
        return [], []
    with open(path, "rb") as f:
        lines = [json.loads(line) for line in f.read().splitlines()]
    return ([r for r in lines if "loss" in r], [r for r in lines if r.get("kind") == "state"])


def fresh_probe():
    """Forget the probe's open sink and counters, as a new process would."""
    p = _state.probe
    if p is not None and p.fd is not None:
        os.close(p.fd)
    _state.probe = None


class Data:
    """A data stream with a position of its own, as a program's loader would have."""

    def __init__(self):
        self.gen = torch.Generator().manual_seed(7)
        self.taken = 0

    def next(self):
        self.taken += 1
        return torch.randn(6, 8, generator=self.gen)

    def state_dict(self):
        return {"gen": self.gen.get_state(), "taken": self.taken}

    def load_state_dict(self, s):
        self.gen.set_state(s["gen"])
        self.taken = s["taken"]


def train(steps_default=8, **pilot_kwargs):
    """A small loop through slurm_pilot.loop: dropout (the generators), AdamW, a warm-up
    schedule and a data stream. Returns the records of the losses it reported."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(16, 8))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 5))
    data = Data()
    pilot = slurm_pilot.loop.Pilot(model, opt, sched, data=data, **pilot_kwargs)
    losses = {}
    for step in pilot.steps(steps_default):
        x = data.next()
        loss = torch.nn.functional.mse_loss(model(x), x.flip(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        pilot.step(loss, tokens=6)
        losses[step] = loss.item()
    return losses, pilot


class PilotEnv(unittest.TestCase):
    def setUp(self):
        self.saved_env = {k: os.environ.pop(k) for k in PILOT_VARS if k in os.environ}
        self.dir = tempfile.mkdtemp(prefix="integrations-")
        fresh_probe()

    def tearDown(self):
        fresh_probe()
        for k in PILOT_VARS:
            os.environ.pop(k, None)
        os.environ.update(self.saved_env)
        shutil.rmtree(self.dir)

    def pilot(self, process, steps=8, at=4, **env):
        fresh_probe()
        for k in PILOT_VARS:
            os.environ.pop(k, None)
        sink = os.path.join(self.dir, process + ".jsonl")
        os.environ.update(PILOT_METRICS=sink, PILOT_STEPS=str(steps), PILOT_CHECKPOINT_STEP=str(at),
                          PILOT_PROCESS=process, PILOT_STAGE="single", PILOT_SEED="1234",
                          PILOT_CHECKPOINT_DIR=os.path.join(self.dir, "ck-" + process),
                          RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
        if process == "resumed":
            os.environ["PILOT_RESUME_DIR"] = os.path.join(self.dir, "ck-reference")
        os.environ.update({k: str(v) for k, v in env.items()})
        return sink

    def bound(self, steps=7, every=3, resume_step=None):
        """The environment of a bound run (pilot-program(7)): no PILOT_METRICS, saves every
        ``every`` steps into DIR/run; requeued after the save of ``resume_step``."""
        fresh_probe()
        for k in PILOT_VARS:
            os.environ.pop(k, None)
        run = os.path.join(self.dir, "run")
        os.environ.update(PILOT_STEPS=str(steps), PILOT_CHECKPOINT_STEP=str(every), PILOT_STAGE="run",
                          PILOT_PROCESS="run", PILOT_SEED="1234", PILOT_CHECKPOINT_DIR=run,
                          RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
        if resume_step is not None:
            os.environ.update(PILOT_RESUME_DIR=run, PILOT_RESUME_STEP=str(resume_step))
        return run

    def resume_record(self, run):
        """The step pilot-resume.json names (its schema checked)."""
        with open(os.path.join(run, "pilot-resume.json")) as f:
            record = json.load(f)
        self.assertEqual(sorted(record), ["schema", "step"])
        self.assertEqual(record["schema"], "slurm-pilot/resume/1")
        return {"step": record["step"]}


class LoopTest(PilotEnv):
    def test_outside_a_pilot_nothing_is_saved_or_reported(self):
        losses, pilot = train(steps_default=5)
        self.assertEqual(sorted(losses), [1, 2, 3, 4, 5])
        self.assertEqual(pilot.last_step, 5)
        self.assertEqual(os.listdir(self.dir), [])
        with self.assertRaises(ValueError):
            slurm_pilot.loop.Pilot().steps()

    def test_reference_then_resumed(self):
        ref_sink = self.pilot("reference")
        ref_losses, _ = train()
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir, "ck-reference"))),
                         ["pilot-rank0.pt", "pilot-state.pt"])
        res_sink = self.pilot("resumed")
        res_losses, pilot = train()
        self.assertEqual(sorted(res_losses), [5, 6, 7, 8])
        self.assertEqual(pilot.last_step, 8)
        ref, ref_states = read(ref_sink)
        res, res_states = read(res_sink)
        self.assertEqual([r["step"] for r in ref], list(range(1, 9)))
        self.assertEqual([r["step"] for r in res], [5, 6, 7, 8])
        # Weights, optimizer, schedule, generators and data restored: the same
        # losses bit for bit, at the same learning rates.
        for r in res:
            a = ref[r["step"] - 1]
            self.assertEqual(r["loss"], a["loss"])
            self.assertEqual(r["lr"], a["lr"])
            self.assertEqual(r["tokens"], 6)
        self.assertEqual(ref[0]["lr"], 1e-2 / 5)  # the rate the optimizer stepped with
        if slurm_pilot.saved is not None and ref_states and res_states:
            saved = [s for s in ref_states if s.get("when") == "saved"]
            restored = [s for s in res_states if s.get("when") == "restored"]
            self.assertEqual([s["step"] for s in saved], [4])
            self.assertEqual([s["step"] for s in restored], [4])
            for name, comp in saved[0]["components"].items():
                self.assertEqual(comp.get("digest"), restored[0]["components"][name].get("digest"),
                                 "component %s differs" % name)

    def test_a_generator_not_restored_shows(self):
        self.pilot("reference")
        ref_losses, _ = train()
        self.pilot("resumed")
        res_losses, _ = train(rng=False)  # dropout draws differ after the resume
        self.assertNotEqual([res_losses[s] for s in (5, 6, 7, 8)],
                            [ref_losses[s] for s in (5, 6, 7, 8)])

    def test_the_programs_own_save_and_load(self):
        calls = []

        def save(directory, step):
            calls.append(("save", step))
            torch.save({"step": step, "model": model.state_dict()}, os.path.join(directory, "mine.pt"))

        def load(directory):
            ck = torch.load(os.path.join(directory, "mine.pt"))
            model.load_state_dict(ck["model"])
            calls.append(("load", ck["step"]))
            return ck["step"]

        model = torch.nn.Linear(3, 3)
        self.pilot("reference", steps=4, at=2)
        pilot = slurm_pilot.loop.Pilot(model, save=save, load=load)
        for step in pilot.steps():
            pilot.step(float(step))
        self.assertEqual(calls, [("save", 2)])
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir, "ck-reference"))),
                         ["mine.pt", "pilot-rank0.pt"])
        self.pilot("resumed", steps=4, at=2)
        pilot = slurm_pilot.loop.Pilot(model, save=save, load=load)
        self.assertEqual(list(pilot.steps()), [3, 4])
        self.assertEqual(calls[-1], ("load", 2))

    def test_a_missing_checkpoint_is_named(self):
        self.pilot("resumed")
        with self.assertRaisesRegex(FileNotFoundError, "pilot-state.pt"):
            train()

    def test_a_bound_run_saves_every_k_and_resumes_from_the_newest(self):
        run = self.bound(steps=7, every=3)
        whole, pilot = train()
        self.assertEqual(sorted(whole), list(range(1, 8)))
        self.assertEqual(sorted(os.listdir(run)), ["pilot-resume.json", "pilot-step-3", "pilot-step-6"])
        self.assertEqual(sorted(os.listdir(os.path.join(run, "pilot-step-3"))),
                         ["pilot-rank0.pt", "pilot-state.pt"])
        self.assertEqual(self.resume_record(run), {"step": 6})
        self.assertEqual(os.listdir(self.dir), ["run"])  # nothing reported anywhere
        # Requeued after the save of step 3: steps 4..7, the same losses bit for bit.
        shutil.rmtree(os.path.join(run, "pilot-step-6"))
        self.bound(steps=7, every=3, resume_step=3)
        resumed, pilot = train()
        self.assertEqual(sorted(resumed), [4, 5, 6, 7])
        self.assertEqual(pilot.last_step, 7)
        for step, loss in resumed.items():
            self.assertEqual(loss, whole[step])
        self.assertEqual(self.resume_record(run), {"step": 6})

    def test_a_bound_run_without_its_checkpoint_is_named(self):
        self.bound(resume_step=6)
        with self.assertRaisesRegex(FileNotFoundError, "pilot-step-6"):
            train()


class Namespace(types.SimpleNamespace):
    pass


def trainer_args(**kw):
    """The TrainingArguments fields the integration reads and sets."""
    base = dict(output_dir="mine", max_steps=1000, save_strategy="steps", save_steps=500,
                save_total_limit=1, load_best_model_at_end=True, logging_strategy="steps",
                logging_steps=50, logging_nan_inf_filter=True, resume_from_checkpoint=None,
                gradient_accumulation_steps=2, per_device_train_batch_size=4,
                ignore_data_skip=False)
    base.update(kw)
    return Namespace(**base)


class HFWithoutTransformersTest(PilotEnv):
    """slurm_pilot.hf's own logic, driven with the events a Trainer sends."""

    def test_outside_a_pilot(self):
        args = trainer_args()
        self.assertIs(slurm_pilot.hf.training_args(args), args)
        self.assertEqual(args.max_steps, 1000)
        self.assertIsNone(slurm_pilot.hf.resume_from_checkpoint())
        self.assertEqual(slurm_pilot.hf.resume_from_checkpoint("x"), "x")

    def test_training_args_in_a_pilot(self):
        self.pilot("reference", steps=20, at=10)
        args = trainer_args()
        adjusted = slurm_pilot.hf.training_args(args)
        self.assertIsNot(adjusted, args)
        self.assertEqual(args.max_steps, 1000)  # the program's own left alone
        self.assertEqual(adjusted.max_steps, 20)
        self.assertEqual((adjusted.save_strategy, adjusted.save_steps), ("steps", 10))
        self.assertIsNone(adjusted.save_total_limit)
        self.assertFalse(adjusted.load_best_model_at_end)
        self.assertEqual(adjusted.output_dir, os.path.join(self.dir, "ck-reference"))
        self.assertEqual(adjusted.logging_steps, 1)
        self.assertFalse(adjusted.logging_nan_inf_filter)
        self.assertEqual(adjusted.gradient_accumulation_steps, 2)  # what is trained: untouched

    def test_resume_path(self):
        self.pilot("resumed", steps=20, at=10)
        self.assertEqual(slurm_pilot.hf.resume_from_checkpoint(),
                         os.path.join(self.dir, "ck-reference", "checkpoint-10"))
        args = slurm_pilot.hf.training_args(trainer_args())
        self.assertEqual(args.resume_from_checkpoint, slurm_pilot.hf.resume_from_checkpoint())

    def test_training_args_and_resume_in_a_bound_run(self):
        run = self.bound(steps=20, every=5)
        args = slurm_pilot.hf.training_args(trainer_args())
        self.assertEqual((args.max_steps, args.save_steps, args.output_dir), (20, 5, run))
        self.assertIsNone(args.save_total_limit)
        self.assertEqual(args.logging_steps, 50)  # a bound run reports nothing: the program's own
        self.assertIsNone(args.resume_from_checkpoint)
        # The Trainer wrote checkpoint-10: on_save marks it the one to resume from.
        slurm_pilot.hf._Hooks().on_save(args, Namespace(global_step=10), None)
        self.assertEqual(self.resume_record(run), {"step": 10})
        self.bound(steps=20, every=5, resume_step=10)
        self.assertEqual(slurm_pilot.hf.resume_from_checkpoint(), os.path.join(run, "checkpoint-10"))
        args = slurm_pilot.hf.training_args(trainer_args())
        self.assertEqual(args.resume_from_checkpoint, os.path.join(run, "checkpoint-10"))

    def run_events(self, process, first, last, eval_at=(), token=0):
        """Events of a Trainer for steps first..last, its batches' token ids ``token``;
        returns the records written."""
        sink = self.pilot(process, steps=6, at=3)
        hooks = slurm_pilot.hf._Hooks()
        args = trainer_args()
        hooks.on_init_end(args, None, None)
        self.assertEqual(args.max_steps, 6)
        model = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        loader = list(range(100))  # 100 micro-batches: 50 steps an epoch
        kw = dict(model=model, optimizer=opt, lr_scheduler=None, train_dataloader=loader)
        state = Namespace(global_step=first - 1)
        control = Namespace(should_log=False, should_save=False, should_evaluate=False,
                            should_training_stop=False)
        hooks.on_train_begin(args, state, control, **kw)
        for step in range(first, last + 1):
            control.should_log = control.should_save = control.should_evaluate = False
            hooks.on_step_begin(args, state, control, **kw)
            for _ in range(2):  # two micro-batches of 3 x 5 tokens
                hooks._before_forward(model, (), {"input_ids": torch.full((3, 5), token)})
                model(torch.zeros(3, 4))
            opt.param_groups[0]["lr"] = 0.1 * step
            hooks.on_pre_optimizer_step(args, state, control, optimizer=opt)
            opt.param_groups[0]["lr"] = 99.0  # the scheduler's next rate, after the step
            state.global_step = step
            hooks.on_step_end(args, state, control, **kw)
            self.assertTrue(control.should_log)
            self.assertEqual(control.should_save, step == 3)
            self.assertEqual(control.should_training_stop, step == 6)
            control.should_evaluate = step in eval_at
            hooks.on_log(args, state, control, logs={"loss": 2.0 + step, "grad_norm": 0.5,
                                                     "learning_rate": 99.0}, **kw)
            if step in eval_at:
                hooks.on_log(args, state, control, logs={"eval_loss": 1.5}, **kw)
            if control.should_save:
                hooks.on_save(args, state, control, **kw)
        hooks.on_train_end(args, state, control, **kw)
        return read(sink)

    def test_callback_reports_each_step(self):
        records, _ = self.run_events("reference", 1, 6, eval_at=(2,))
        self.assertEqual([r["step"] for r in records], [1, 2, 3, 4, 5, 6])
        first, second = records[0], records[1]
        self.assertEqual(first["loss"], 3.0)
        self.assertAlmostEqual(first["lr"], 0.1)  # the rate stepped with, not the next one
        self.assertEqual(first["grad_norm"], 0.5)
        self.assertEqual(first["tokens"], 30)
        self.assertEqual((first["micro_batch"], first["seq_len"]), (3, 5))
        self.assertEqual(second["eval_loss"], 1.5)
        self.assertNotIn("eval_loss", first)
        self.assertEqual(first["params"], 20)

    def test_fingerprints_at_the_step_after_k(self):
        if getattr(slurm_pilot, "saved", None) is None:
            self.skipTest("the probe has no saved()")
        _, saved = self.run_events("reference", 1, 6)
        _, restored = self.run_events("resumed", 4, 6)
        self.assertEqual([(s["when"], s["step"]) for s in saved], [("saved", 3)])
        self.assertEqual([(s["when"], s["step"]) for s in restored], [("restored", 3)])
        self.assertEqual(saved[0]["components"]["data"], restored[0]["components"]["data"])
        self.assertIn("model", saved[0]["components"])

    def test_another_batch_after_the_resume_shows(self):
        """The fingerprints hold the digest of the first batch of the step after K: a
        resumed Trainer that draws other batches differs in its data position."""
        if getattr(slurm_pilot, "saved", None) is None:
            self.skipTest("the probe has no saved()")
        _, saved = self.run_events("reference", 1, 6)
        _, same = self.run_events("resumed", 4, 6)
        _, other = self.run_events("resumed", 4, 6, token=7)
        self.assertEqual(saved[0]["components"]["data"], same[0]["components"]["data"])
        self.assertNotEqual(saved[0]["components"]["data"], other[-1]["components"]["data"])

    def test_ignore_data_skip_moves_the_data_position(self):
        hooks = slurm_pilot.hf._Hooks()
        hooks._objects["train_dataloader"] = list(range(100))
        state = Namespace(global_step=3)
        ref = hooks._state(trainer_args(), state, resumed=False)["data_position"]
        res = hooks._state(trainer_args(ignore_data_skip=True), state, resumed=True)["data_position"]
        self.assertEqual(ref, {"epoch": 0, "batches_into_epoch": 6})
        self.assertEqual(res, {"epoch": 0, "batches_into_epoch": 0})


class LightningWithoutLightningTest(PilotEnv):
    def test_outside_a_pilot(self):
        self.assertEqual(slurm_pilot.lightning.trainer_kwargs(max_steps=5), {"max_steps": 5})
        self.assertIsNone(slurm_pilot.lightning.ckpt_path())
        self.assertIsNone(slurm_pilot.lightning.checkpoint_callback())

    def test_ckpt_path(self):
        self.pilot("resumed", steps=8, at=4)
        directory = os.path.join(self.dir, "ck-reference")
        os.makedirs(directory)
        expected = os.path.join(directory, "pilot-step=4.ckpt")
        self.assertEqual(slurm_pilot.lightning.ckpt_path(), expected)  # fit() names it when absent
        for name in ("pilot-step=4.ckpt", "pilot-step=8.ckpt", "pilot-step=40.ckpt"):
            open(os.path.join(directory, name), "w").close()
        self.assertEqual(slurm_pilot.lightning.ckpt_path(), expected)

    def test_a_bound_run(self):
        run = self.bound(steps=20, every=5, resume_step=15)
        self.assertEqual(slurm_pilot.lightning.ckpt_path(), os.path.join(run, "pilot-step=15.ckpt"))
        saves = []

        class ModelCheckpoint:  # the part of Lightning's the integration subclasses
            def __init__(self, **kw):
                self.kw = kw

            def _save_checkpoint(self, trainer, filepath):
                saves.append(filepath)

        pl = types.SimpleNamespace(callbacks=types.SimpleNamespace(ModelCheckpoint=ModelCheckpoint))
        cls = slurm_pilot.lightning._marking_checkpoint_class(pl)
        ckpt = cls(dirpath=run)
        ckpt._save_checkpoint(Namespace(global_step=20), os.path.join(run, "pilot-step=20.ckpt"))
        self.assertEqual(saves, [os.path.join(run, "pilot-step=20.ckpt")])
        self.assertEqual(self.resume_record(run), {"step": 20})

    def test_batch_shape_and_digest(self):
        batch = (torch.arange(12).view(3, 4), torch.zeros(3, 4))
        self.assertEqual(slurm_pilot._glue.batch_shape(batch), (12, 3, 4))
        self.assertEqual(slurm_pilot._glue.batch_shape({"x": torch.zeros(2, 2)}), (None, None, None))
        a = slurm_pilot._glue.batch_digest(batch)
        self.assertEqual(a, slurm_pilot._glue.batch_digest((torch.arange(12).view(3, 4),)))
        self.assertNotEqual(a, slurm_pilot._glue.batch_digest((torch.arange(12).flip(0).view(3, 4),)))


class DeviceRecordsTest(PilotEnv):
    """Losses and norms handed as tensors that wait for the device (its part faked on the
    CPU, fake_staging.py): the integrations still write every record, in step order, the
    records up to K before the save's state line."""

    def device(self, process, **kw):
        sink = self.pilot(process, **kw)
        staging = FakeStaging()
        _state.current().staging = staging
        return sink, staging

    def test_the_loop_helper(self):
        sink, staging = self.device("reference")  # 8 steps, K = 4
        train()
        with open(sink, "rb") as f:
            lines = [json.loads(line) for line in f.read().splitlines()]
        order = [(x.get("when"), x["step"]) for x in lines
                 if "loss" in x or x.get("kind") == "state"]
        self.assertEqual(order, [(None, 1), (None, 2), (None, 3), (None, 4), ("saved", 4),
                                 (None, 5), (None, 6), (None, 7), (None, 8)])
        self.assertEqual(staging.waited, [1, 2, 3, 4, 5, 6, 7, 8])  # at K, K+1 and the last

    def test_the_lightning_callback_writes_them_when_training_ends(self):
        sink, staging = self.device("reference", steps=8, at=100)
        hooks = slurm_pilot.lightning._Hooks()
        module = torch.nn.Linear(4, 4)
        opt = torch.optim.SGD(module.parameters(), lr=0.5)
        trainer = types.SimpleNamespace(global_step=0, optimizers=[opt], accumulate_grad_batches=1)
        hooks.on_train_start(trainer, module)
        for i in range(5):
            batch = (torch.full((2, 3), i), torch.zeros(2, 4))
            hooks.on_train_batch_start(trainer, module, batch, i)
            loss = module(torch.ones(2, 4)).square().mean()
            loss.backward()
            hooks.on_before_optimizer_step(trainer, module, opt)
            opt.step()
            opt.zero_grad()
            trainer.global_step += 1
            hooks.on_train_batch_end(trainer, module, {"loss": loss}, batch, i)
        self.assertEqual(read(sink)[0], [])  # every record still waits for the device
        hooks.on_train_end(trainer, module)
        records, _ = read(sink)
        self.assertEqual([r["step"] for r in records], [1, 2, 3, 4, 5])
        self.assertEqual(staging.waited, [1, 2, 3, 4, 5])
        for r in records:
            self.assertEqual(r["tokens"], 6)
            self.assertIsInstance(r["loss"], float)
            self.assertGreater(r["grad_norm"], 0)


def run_program(self, argv, steps, at):
    """The reference and the resumed process of ``argv`` as a pilot runs them; their records."""
    env = {k: v for k, v in os.environ.items() if k not in PILOT_VARS}
    env.update(PYTHONPATH=os.path.join(ROOT, "python"), PILOT_STEPS=str(steps),
               PILOT_CHECKPOINT_STEP=str(at), PILOT_STAGE="single", PILOT_DEVICE="cpu",
               PILOT_SEED="1234", RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT="29517", CUDA_VISIBLE_DEVICES="")
    out = {}
    for process in ("reference", "resumed"):
        e = dict(env, PILOT_PROCESS=process, PILOT_METRICS=os.path.join(self.dir, process + ".jsonl"),
                 PILOT_CHECKPOINT_DIR=os.path.join(self.dir, "ck-" + process))
        if process == "resumed":
            e["PILOT_RESUME_DIR"] = os.path.join(self.dir, "ck-reference")
        r = subprocess.run([sys.executable] + argv, env=e, cwd=self.dir, capture_output=True,
                           text=True, timeout=600)
        self.assertEqual(r.returncode, 0, "%s: %s" % (process, r.stderr[-3000:]))
        out[process] = read(e["PILOT_METRICS"])
    return out


@unittest.skipUnless(installed("transformers"), "transformers is not installed")
class HFTrainerTest(PilotEnv):
    def test_trainer_reference_and_resumed(self):
        out = run_program(self, [os.path.join(ROOT, "examples", "hf_trainer.py"), "--eval-steps", "2"],
                          steps=6, at=3)
        ref, res = out["reference"][0], out["resumed"][0]
        self.assertEqual([r["step"] for r in ref], [1, 2, 3, 4, 5, 6])
        self.assertEqual([r["step"] for r in res], [4, 5, 6])
        for r in res:
            a = ref[r["step"] - 1]
            self.assertAlmostEqual(r["loss"], a["loss"], places=3)
            self.assertEqual(r["lr"], a["lr"])
            self.assertEqual(r["tokens"], a["tokens"])
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "ck-reference", "checkpoint-3")))
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "ck-reference", "checkpoint-6")))


@unittest.skipUnless(installed("lightning") or installed("pytorch_lightning"),
                     "lightning is not installed")
class LightningTest(PilotEnv):
    def test_lightning_reference_and_resumed(self):
        out = run_program(self, [os.path.join(ROOT, "bench", "programs", "lightning_gpt.py"),
                                 "--accelerator", "cpu", "--precision", "32", "--grad-accum", "2"],
                          steps=6, at=3)
        ref, res = out["reference"][0], out["resumed"][0]
        self.assertEqual([r["step"] for r in ref], [1, 2, 3, 4, 5, 6])
        self.assertEqual([r["step"] for r in res], [4, 5, 6])
        for r in res:
            self.assertAlmostEqual(r["loss"], ref[r["step"] - 1]["loss"], places=5)
        self.assertEqual(ref[0]["tokens"], 2 * 4 * 64)  # two micro-batches of 4 x 64
        self.assertTrue(os.path.exists(os.path.join(self.dir, "ck-reference", "pilot-step=3.ckpt")))


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""One table of bad inputs across every `mdtp` command and every input file kind (issue 16).

Each case runs `mdtp ARGS` (under `mpiexec -n N` for the MPI commands) in a scratch directory
holding good and damaged input files, and must:
  - end with the same non-zero status (2) on every rank, within a time bound;
  - print, once for the job (rank 0), exactly one line `mdtp <command>: error: ...` containing the expected
    text, which names the offending value;
  - leave every file that existed before unchanged (SHA-256 before and after) and create none.

  test_bad_inputs.py --mdtp BIN --mpiexec M [--only options|files] [--list]
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

TIME_BOUND = 60.0  # seconds per case: MPI start-up on an oversubscribed CI machine included

# (name, ranks (0: no mpiexec), expected text in the error line, arguments).  Paths are relative
# to the scratch directory, whose files make_fixtures writes.
OPTION_CASES = [
    ("mesh_world_zero", 0, "got world=0", ["mesh", "--world", "0"]),
    ("mesh_tp_not_dividing", 0, "world=6 is not divisible by tp*pp*cp=4", ["mesh", "--world", "6", "--tp", "4"]),
    ("mesh_2d_not_square", 0, "2D tensor parallelism needs a square TP size; got tp=2",
     ["mesh", "--world", "2", "--tp", "2", "--tp-mode", "2d"]),
    ("mesh_bad_order", 0, "tp-tp", ["mesh", "--world", "4", "--order", "tp-tp"]),
    ("mesh_depth_25d", 0, "got tp=8, d=3", ["mesh", "--world", "8", "--tp", "8", "--tp-mode", "2.5d", "--tp-depth", "3"]),
    ("mesh_ranks_per_node", 0, "got ranks_per_node=-1", ["mesh", "--world", "4", "--ranks-per-node", "-1"]),
    ("cost_no_mode", 0, "--tp-mode", ["cost", "--tp", "2", "--micro-batch-size", "2", "--seq", "4", "--hidden", "8"]),
    ("cost_bad_layer", 0, "'attention-xl'", ["cost", "--tp-mode", "1d", "--tp", "2", "--micro-batch-size", "2", "--seq", "4",
                                             "--hidden", "8", "--layer", "attention-xl"]),
    ("cost_hidden_not_divisible", 0, "out_features=32 must be divisible by 3", ["cost", "--tp-mode", "1d", "--tp", "3", "--micro-batch-size", "2", "--seq", "4",
                                                "--hidden", "8"]),
    ("cost_zero_without_params", 0, "--params", ["cost", "--zero-table", "--dp", "8"]),
    ("cost_calibration_missing", 0, "no such file 'nothere.h5'",
     ["cost", "--tp-mode", "1d", "--tp", "2", "--micro-batch-size", "2", "--seq", "4", "--hidden", "8", "--calibration",
      "nothere.h5"]),
    ("plan_unknown_cluster", 0, "'dgx-z100'", ["plan", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq",
                                                "32", "--vocab", "100", "--global-batch", "8", "--gpus", "8",
                                                "--cluster", "dgx-z100"]),
    ("plan_heads_not_dividing", 0, "heads", ["plan", "--layers", "2", "--hidden", "64", "--heads", "5", "--seq", "32",
                                             "--vocab", "100", "--global-batch", "8", "--gpus", "8"]),
    ("plan_bad_schedule", 0, "'2f2b'", ["plan", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32",
                                        "--vocab", "100", "--global-batch", "8", "--gpus", "8", "--pp", "2",
                                        "--schedule", "2f2b"]),
    ("plan_zero_stage", 0, "--zero: must be between 0 and 3; got 4",
     ["plan", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32", "--vocab", "100", "--global-batch",
      "8", "--gpus", "8", "--tp-mode", "1d", "--tp", "2", "--zero", "4"]),
    ("plan_gqa_gpt2", 0, "a gpt2 model has kv_heads = heads = 4; got kv_heads 2",
     ["plan", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32", "--vocab", "100", "--global-batch",
      "8", "--gpus", "8", "--kv-heads", "2"]),
    ("cost_gqa_gpt2", 0, "a gpt2 model has kv_heads = heads = 4; got kv_heads 2",
     ["cost", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32", "--vocab", "100", "--global-batch",
      "8", "--gpus", "8", "--tp-mode", "1d", "--tp", "2", "--kv-heads", "2"]),
    ("cost_llama_kv_not_dividing", 0, "model.kv_heads=3 must divide model.heads=4",
     ["cost", "--model", "llama", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32", "--vocab", "100",
      "--global-batch", "8", "--gpus", "8", "--tp-mode", "1d", "--tp", "2", "--kv-heads", "3"]),
    ("train_llama_kv_over_tp", 4, "num_key_value_heads=3 and the 4 ranks that split the heads in mode 1d must divide",
     ["train", "--model", "llama", "--layers", "2", "--hidden", "48", "--heads", "12", "--kv-heads", "3", "--seq", "16",
      "--tp-mode", "1d", "--tp", "4", "--steps", "1"]),
    ("cost_llama_kv_over_tp", 0, "kv_heads=3 must divide or be divisible by it",
     ["cost", "--model", "llama", "--layers", "2", "--hidden", "48", "--heads", "12", "--seq", "32", "--vocab", "100",
      "--global-batch", "8", "--gpus", "8", "--tp-mode", "1d", "--tp", "4", "--kv-heads", "3"]),
    ("plan_bad_recompute", 0, "'sometimes'", ["plan", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq",
                                              "32", "--vocab", "100", "--global-batch", "8", "--gpus", "8",
                                              "--recompute", "sometimes"]),
    ("experiment_bad_ranks", 0, "--ranks", ["experiment", "--ranks", "two"]),
    ("smoke_tp_too_big", 2, "world=2", ["smoke", "--tp", "4"]),
    ("smoke_bad_timeout", 2, "collective timeout '-3'", ["smoke", "--collective-timeout", "-3"]),
    ("train_tp_not_dividing", 2, "world=2 is not divisible by tp*pp*cp=3", ["train", "--tp-mode", "1d", "--tp", "3"]),
    ("train_heads_not_dividing", 2, "heads", ["train", "--tp-mode", "1d", "--tp", "2", "--heads", "3", "--hidden", "12",
                                              "--steps", "1"]),
    ("train_hidden_not_heads", 2, "embd", ["train", "--heads", "4", "--hidden", "18", "--steps", "1"]),
    ("train_zero_batch", 2, "--global-batch", ["train", "--global-batch", "0", "--steps", "1"]),
    ("train_negative_lr", 2, "learning rate must be positive; got -1", ["train", "--lr", "-1", "--steps", "1"]),
    ("train_batch_not_dp", 2, "batch", ["train", "--global-batch", "3", "--steps", "1"]),
    ("train_bad_schedule", 2, "'zigzag'", ["train", "--pp", "2", "--schedule", "zigzag", "--steps", "1"]),
    ("train_bad_device", 2, "'tpu'", ["train", "--device", "tpu", "--steps", "1"]),
    ("train_loss_scale_bf16", 2, "precision.loss_scale=8 applies to f16 training only; got bf16",
     ["train", "--dtype", "bf16", "--loss-scale", "8", "--steps", "1"]),
    ("train_loss_scale_negative", 2, "precision.loss_scale must be >= 0 (0: dynamic under f16); got -1",
     ["train", "--dtype", "f16", "--loss-scale", "-1", "--steps", "1"]),
    ("train_hysteresis_zero", 2, "precision.hysteresis must be >= 1; got 0",
     ["train", "--dtype", "f16", "--hysteresis", "0", "--steps", "1"]),
    ("train_bad_dtype", 2, "'f8'", ["train", "--dtype", "f8", "--steps", "1"]),
    ("train_grads_other_16bit", 2, "--grad-reduce-dtype f16 with --dtype bf16",
     ["train", "--dtype", "bf16", "--grad-reduce-dtype", "f16", "--steps", "1"]),
    ("train_grads_narrower", 2, "--grad-reduce-dtype bf16 with --dtype f32",
     ["train", "--dtype", "f32", "--grad-reduce-dtype", "bf16", "--steps", "1"]),
    ("train_grads_wider_f32", 2, "--grad-reduce-dtype f64 with --dtype f32",
     ["train", "--dtype", "f32", "--grad-reduce-dtype", "f64", "--steps", "1"]),
    ("train_nan_timeout", 2, "collective timeout 'nan'", ["train", "--collective-timeout", "nan", "--steps", "1"]),
    ("train_pp_layers_count", 2, "the layer split has 3 entries", ["train", "--pp", "2", "--layers", "2", "--pp-layers", "1,1,1",
                                                 "--steps", "1"]),
    ("train_bad_recompute", 2, "got 'sometimes'", ["train", "--recompute", "sometimes", "--steps", "1"]),
    ("train_zero_stage", 2, "--zero: must be between 0 and 3; got 5", ["train", "--zero", "5", "--steps", "1"]),
    ("train_zero_bucket", 2, "got bucket_mb=0", ["train", "--zero-bucket-mb", "0", "--steps", "1"]),
    ("calibrate_min_over_max", 2, "--min-bytes", ["calibrate", "--min-bytes", "1M", "--max-bytes", "1K",
                                                  "--allow-oversubscribed", "--out", "new_cal.h5"]),
    ("calibrate_bad_group", 2, "'tp.diagonal'", ["calibrate", "--groups", "tp.diagonal", "--allow-oversubscribed",
                                                 "--out", "new_cal.h5"]),
    ("calibrate_bad_op", 2, "'all_to_all'", ["calibrate", "--ops", "all_to_all", "--allow-oversubscribed",
                                             "--out", "new_cal.h5"]),
    ("bench_bad_layer", 2, "'conv'", ["bench", "--layer", "conv", "--out", "new_bench.h5"]),
    ("bench_ffn_count", 2, "--ffn-hidden", ["bench", "--hidden", "16,32", "--ffn-hidden", "64,64,64", "--out",
                                            "new_bench.h5"]),
    ("bench_bad_dtype", 2, "bf16", ["bench", "--dtype", "bf16", "--out", "new_bench.h5"]),
]

FILE_CASES = [
    # checkpoints given to train --init-from
    ("ckpt_missing", 2, "'absent.h5' does not exist", ["train", "--init-from", "absent.h5", "--steps", "1"]),
    ("ckpt_not_hdf5", 2, "'text.h5' is not an HDF5 file", ["train", "--init-from", "text.h5", "--steps", "1"]),
    ("ckpt_empty", 2, "'empty.h5'", ["train", "--init-from", "empty.h5", "--steps", "1"]),
    ("ckpt_truncated", 2, "'truncated.h5'", ["train", "--init-from", "truncated.h5", "--steps", "1"]),
    ("ckpt_flipped_byte", 2, "'transformer.wpe.weight' fails its checksum",
     ["train", "--init-from", "flipped.h5", "--steps", "1"]),
    ("ckpt_flipped_moment", 2, "'optim/exp_avg/transformer.ln_f.weight' fails its checksum",
     ["train", "--init-from", "flipped_moment.h5", "--steps", "1"]),
    ("ckpt_wrong_shape", 2, "transformer.wpe.weight", ["train", "--init-from", "wrong_shape.h5", "--steps", "1"]),
    ("ckpt_missing_dataset", 2, "transformer.ln_f.bias", ["train", "--init-from", "missing_dataset.h5", "--steps", "1"]),
    ("ckpt_integer_dataset", 2, "transformer.ln_f.weight", ["train", "--init-from", "int_dataset.h5", "--steps", "1"]),
    ("ckpt_extra_dataset", 2, "'surprise'", ["train", "--init-from", "extra_dataset.h5", "--steps", "1"]),
    ("ckpt_no_config", 2, "n_embd", ["train", "--init-from", "no_config.h5", "--steps", "1"]),
    ("ckpt_negative_config", 2, "n_layer", ["train", "--init-from", "negative_config.h5", "--steps", "1"]),
    ("ckpt_config_mismatch", 2, "--init-from good.h5 holds a model with --hidden 16 but --hidden 32", ["train", "--init-from", "good.h5", "--hidden", "32", "--steps", "1"]),
    ("ckpt_nan_value", 2, "step 2: the loss is NaN; first non-finite gradient: 'transformer.wte.weight'", ["train", "--init-from", "nan_value.h5", "--steps", "1"]),
    ("ckpt_dir", 2, "'adir'", ["train", "--init-from", "adir", "--steps", "1"]),
    # token data given to train --data
    ("tokens_missing", 2, "'absent_tokens.h5'", ["train", "--data", "absent_tokens.h5", "--steps", "1"]),
    ("tokens_not_hdf5", 2, "'text.h5'", ["train", "--data", "text.h5", "--steps", "1"]),
    ("tokens_out_of_range", 2, "= 9999 is outside the vocabulary",
     ["train", "--data", "tokens_big_id.h5", "--steps", "1"]),
    ("tokens_negative", 2, "= -5 is outside the vocabulary", ["train", "--data", "tokens_negative.h5", "--steps", "1"]),
    ("tokens_float", 2, "'inputs'", ["train", "--data", "tokens_float.h5", "--steps", "1"]),
    ("tokens_shape_mismatch", 2, "targets", ["train", "--data", "tokens_shape.h5", "--steps", "1"]),
    ("tokens_no_targets", 2, "'targets'", ["train", "--data", "tokens_no_targets.h5", "--steps", "1"]),
    ("tokens_no_rows", 2, "'tokens_no_rows.h5' holds no tokens", ["train", "--data", "tokens_no_rows.h5", "--steps", "1"]),
    ("tokens_vocab_too_small", 2, "= 4 is outside the vocabulary [0, 4)", ["train", "--data", "tokens_ok.h5", "--vocab", "4", "--steps", "1"]),
    ("tokens_empty_text", 2, "the text corpus 'empty.txt' holds 0 characters", ["train", "--data", "empty.txt", "--steps", "1"]),
    # results files given to --out
    ("train_out_not_hdf5", 2, "'text.h5' exists but is not an HDF5 file",
     ["train", "--out", "text.h5", "--steps", "1"]),
    ("bench_out_not_hdf5", 2, "'text.h5' exists but is not an HDF5 file", ["bench", "--out", "text.h5"]),
    ("calibrate_out_not_hdf5", 2, "'text.h5' exists but is not an HDF5 file",
     ["calibrate", "--out", "text.h5", "--allow-oversubscribed"]),
    ("train_out_truncated", 2, "truncated_results.h5", ["train", "--out", "truncated_results.h5", "--steps", "1"]),
    # calibration files
    ("bench_calibration_not_hdf5", 2, "--calibration file 'text.h5' is not an HDF5 file", ["bench", "--calibration", "text.h5", "--out", "new_bench.h5"]),
    ("bench_calibration_no_runs", 2, "holds no calibrate run", ["bench", "--calibration", "results_only.h5",
                                                               "--out", "new_bench.h5"]),
    ("bench_calibration_no_link_table", 2, "has no table 'link_params'", ["bench", "--calibration", "cal_no_links.h5",
                                                           "--out", "new_bench.h5"]),
    ("bench_calibration_bad_run", 2, "'cal.h5' has no run '/runs/0042-calibrate'", ["bench", "--calibration", "cal.h5:/runs/0042-calibrate",
                                                        "--out", "new_bench.h5"]),
    ("cost_calibration_no_fits", 0, "has no table 'collective_fits'", ["cost", "--tp-mode", "1d", "--tp", "2", "--micro-batch-size", "2", "--seq",
                                                        "4", "--hidden", "8", "--calibration", "cal_no_fits.h5"]),
    ("cost_calibration_not_hdf5", 0, "--calibration file 'text.h5' is not an HDF5 file", ["cost", "--tp-mode", "1d", "--tp", "2", "--micro-batch-size", "2", "--seq", "4",
                                                 "--hidden", "8", "--calibration", "text.h5"]),
    ("cost_calibration_run_missing", 0, "'cal.h5' has no run '/runs/0007-calibrate'",
     ["cost", "--tp-mode", "1d", "--tp", "2", "--micro-batch-size", "2", "--seq", "4", "--hidden", "8", "--calibration", "cal.h5",
      "--calibration-run", "0007-calibrate"]),
    # cluster files given to plan
    ("plan_cluster_missing_file", 0, "no_cluster.json", ["plan", "--layers", "2", "--hidden", "64", "--heads", "4",
                                                         "--seq", "32", "--vocab", "100", "--global-batch", "8",
                                                         "--gpus", "8", "--cluster", "./no_cluster.json"]),
    ("plan_cluster_not_json", 0, "bad_cluster.json", ["plan", "--layers", "2", "--hidden", "64", "--heads", "4",
                                                      "--seq", "32", "--vocab", "100", "--global-batch", "8",
                                                      "--gpus", "8", "--cluster", "./bad_cluster.json"]),
    ("plan_cluster_missing_key", 0, "field 'source' is missing", ["plan", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq",
                                                "32", "--vocab", "100", "--global-batch", "8", "--gpus", "8",
                                                "--cluster", "./partial_cluster.json"]),
]


def run(command, cwd, timeout=TIME_BOUND * 2):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MDTP_COLLECTIVE_TIMEOUT="30")
    start = time.monotonic()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    return result, time.monotonic() - start


def make_fixtures(mdtp, mpiexec, d):
    import h5py
    import numpy as np

    def mdtp_ok(*args, ranks=1):
        r, _ = run([mpiexec, "-n", str(ranks), mdtp, *args], d)
        if r.returncode != 0:
            raise RuntimeError(f"fixture `mdtp {' '.join(args)}` failed: {r.stderr[-2000:]}")

    mdtp_ok("train", "--steps", "1", "--layers", "1", "--hidden", "16", "--heads", "2", "--seq", "8", "--global-batch", "2",
            "--save", "good.h5", "--out", "results_only.h5")
    mdtp_ok("calibrate", "--max-bytes", "64", "--iters", "1", "--warmup", "0", "--gemm-size", "16",
            "--allow-oversubscribed", "--out", "cal.h5", ranks=2)

    def copy(src, dst):
        shutil.copyfile(os.path.join(d, src), os.path.join(d, dst))
        return os.path.join(d, dst)

    def flip(path, dataset):
        with h5py.File(path, "r") as f:
            offset = f[dataset].id.get_offset()
        with open(path, "r+b") as f:
            f.seek(offset + 1)
            b = f.read(1)
            f.seek(offset + 1)
            f.write(bytes([b[0] ^ 0x40]))

    with open(os.path.join(d, "text.h5"), "w") as f:
        f.write("this is not HDF5\n" * 10)
    open(os.path.join(d, "empty.h5"), "w").close()
    open(os.path.join(d, "empty.txt"), "w").close()
    os.mkdir(os.path.join(d, "adir"))
    good = open(os.path.join(d, "good.h5"), "rb").read()
    with open(os.path.join(d, "truncated.h5"), "wb") as f:
        f.write(good[: len(good) // 2])
    flip(copy("good.h5", "flipped.h5"), "transformer.wpe.weight")
    flip(copy("good.h5", "flipped_moment.h5"), "optim/exp_avg/transformer.ln_f.weight")
    with h5py.File(copy("good.h5", "wrong_shape.h5"), "r+") as f:
        data = f["transformer.wpe.weight"][...]
        del f["transformer.wpe.weight"]
        f["transformer.wpe.weight"] = data[:-1]
    with h5py.File(copy("good.h5", "missing_dataset.h5"), "r+") as f:
        del f["transformer.ln_f.bias"]
    with h5py.File(copy("good.h5", "int_dataset.h5"), "r+") as f:
        shape = f["transformer.ln_f.weight"].shape
        del f["transformer.ln_f.weight"]
        f["transformer.ln_f.weight"] = np.ones(shape, dtype=np.int32)
    with h5py.File(copy("good.h5", "extra_dataset.h5"), "r+") as f:
        f["surprise"] = np.zeros(3, dtype=np.float32)
    with h5py.File(copy("good.h5", "no_config.h5"), "r+") as f:
        del f.attrs["n_embd"]
    with h5py.File(copy("good.h5", "negative_config.h5"), "r+") as f:
        f.attrs["n_layer"] = -1
    with h5py.File(copy("good.h5", "nan_value.h5"), "r+") as f:
        data = f["transformer.wte.weight"][...]
        data[0, 0] = np.nan
        del f["transformer.wte.weight"]
        f["transformer.wte.weight"] = data  # no checksum: h5py wrote it
    with h5py.File(os.path.join(d, "good.h5"), "r") as f:
        vocab = int(f.attrs["vocab_size"])

    def tokens(name, inputs, targets, vocab_size=None):
        with h5py.File(os.path.join(d, name), "w") as f:
            if inputs is not None:
                f["inputs"] = inputs
            if targets is not None:
                f["targets"] = targets
            if vocab_size is not None:
                f.attrs["vocab_size"] = vocab_size

    ok = (np.arange(16 * 8, dtype=np.int32).reshape(16, 8) % vocab)
    tokens("tokens_ok.h5", ok, (ok + 1) % vocab)
    big = ok.copy()
    big[2, 3] = 9999
    tokens("tokens_big_id.h5", big, ok, vocab)
    negative = ok.copy()
    negative[1, 1] = -5
    tokens("tokens_negative.h5", negative, ok)
    tokens("tokens_float.h5", ok.astype(np.float32), ok)
    tokens("tokens_shape.h5", ok, ok[:3])
    tokens("tokens_no_targets.h5", ok, None)
    tokens("tokens_no_rows.h5", ok[:0], ok[:0])
    results = open(os.path.join(d, "results_only.h5"), "rb").read()
    with open(os.path.join(d, "truncated_results.h5"), "wb") as f:
        f.write(results[: len(results) // 2])
    with h5py.File(copy("cal.h5", "cal_no_links.h5"), "r+") as f:
        for group in f["runs"]:
            del f["runs"][group]["link_params"]
    with h5py.File(copy("cal.h5", "cal_no_fits.h5"), "r+") as f:
        for group in f["runs"]:
            del f["runs"][group]["collective_fits"]
    with open(os.path.join(d, "bad_cluster.json"), "w") as f:
        f.write("{ this is not json")
    with open(os.path.join(d, "partial_cluster.json"), "w") as f:
        f.write('{"name": "half a cluster"}')


def tree_hashes(d):
    hashes = {}
    for root, dirs, files in os.walk(d):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                hashes[os.path.relpath(path, d)] = hashlib.sha256(f.read()).hexdigest()
        for name in dirs:
            hashes[os.path.relpath(os.path.join(root, name), d) + "/"] = "dir"
    return hashes


def check_case(mdtp, mpiexec, d, name, ranks, expected, args):
    failures = []
    before = tree_hashes(d)
    command = ([mpiexec, "-n", str(ranks)] if ranks else []) + [mdtp, *args]
    try:
        r, elapsed = run(command, d)
    except subprocess.TimeoutExpired:
        return [f"{name}: still running after {TIME_BOUND * 2:.0f} s"], None
    who = f"mdtp {args[0]}: error: "
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    errors = [l for l in lines if l.startswith(who)]
    n = 1  # once for the job: rank 0 prints it (with "(on all N ranks)" when every rank raised it)
    if r.returncode != 2:
        failures.append(f"exit status {r.returncode}, expected 2")
    if elapsed > TIME_BOUND:
        failures.append(f"took {elapsed:.1f} s, over {TIME_BOUND:.0f} s")
    if len(errors) != n or len(lines) != n:
        failures.append(f"{len(errors)} error lines of {len(lines)} lines on stderr, expected {n} (once for the job)")
    if len(set(errors)) > 1:
        failures.append("the ranks printed different lines")
    if not any(expected in l for l in errors):
        failures.append(f"no error line contains {expected!r}")
    if r.stdout.strip() and args[0] not in ("train",):
        failures.append(f"stdout not empty: {r.stdout[:200]!r}")
    after = tree_hashes(d)
    changed = sorted(k for k in before if after.get(k) != before[k])
    created = sorted(k for k in after if k not in before)
    if changed:
        failures.append(f"changed {changed}")
    if created:
        failures.append(f"created {created}")
    for extra in created:
        p = os.path.join(d, extra)
        if os.path.isdir(p):
            shutil.rmtree(p)
        else:
            os.remove(p)
    return [f"{name}: {f}" for f in failures], (errors[0] if errors else (lines[0] if lines else "")), elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mdtp", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--only", choices=["options", "files"])
    ap.add_argument("--list", action="store_true", help="print every case's error line")
    a = ap.parse_args()
    cases = (OPTION_CASES if a.only != "files" else []) + (FILE_CASES if a.only != "options" else [])
    names = [c[0] for c in cases]
    assert len(names) == len(set(names)), "case names must be unique"
    d = tempfile.mkdtemp(prefix="mdtp-bad-inputs-")
    try:
        make_fixtures(a.mdtp, a.mpiexec, d)
        failures = []
        for name, ranks, expected, args in cases:
            f, line, elapsed = check_case(a.mdtp, a.mpiexec, d, name, ranks, expected, args)
            status = "FAIL" if f else "ok  "
            print(f"{status} {name:34s} {elapsed:5.1f} s  {line}", flush=True)
            failures += f
        for f in failures:
            print("FAIL:", f)
        print(f"{len(cases)} cases, {len(failures)} failures")
        return 1 if failures else 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

# The bad-input table of `loopgate` (sourced by bad_input.sh): one row per case.
#   row NP 'expected substring of the one-line message' ARGV...
# NP 0: the binary runs alone (a singleton MPI job for `run`); NP n: under `mpiexec -q -n n`.
# Every row must exit 2 with exactly one stderr line "loopgate: error: ..." holding the substring (the flag and
# the value as typed), print nothing on stdout, and finish within the time limit. Paths: $SRC (the source
# tree), $WORK (this run's scratch folder, which must hold nothing new afterwards), $EX (docs/examples/megatron).

# ---- the cases ----
row 0 "--iters -5: must be >= 1" run --iters -5
row 0 "--iters -5: must be >= 1" run --iters=-5
row 0 "--inject 'iter=3,site=grad,bucket=99': bucket=99 is beyond rank 0's 13 grad buckets" run --inject 'iter=3,site=grad,bucket=99'
row 2 "--inject 'iter=1,site=loss,mb=7': mb=7 is beyond the 4 microbatches" run --fixture pp2 --inject 'iter=1,site=loss,mb=7'
row 0 "--inject 'iter=1,site=loss,rank=5': rank=5 is outside the job: --fixture single runs 1 rank" run --inject 'iter=1,site=loss,rank=5'
row 0 "--inject 'iter=30,site=loss': iter=30 is past the run: --iters 4 runs iterations 0-3" run --iters 4 --inject 'iter=30,site=loss'
row 0 "--trace $WORK/no-such-dir/t.json: directory $WORK/no-such-dir does not exist" run --iters 3 --trace "$WORK/no-such-dir/t.json"
row 0 "--iters 2: the LR warmup (--lr-warmup-iters, fixture default 2) must be shorter than the decay (--lr-decay-iters, default --iters 2)" run --iters 2

# ---- loopgate run: counts and reals ----
row 0 "--iters 0: must be >= 1" run --iters 0
row 0 "Could not convert: --iters = abc" run --iters abc
row 0 "--iters '': needs a value" run --iters ''
row 0 "--log-interval 0: must be >= 1" run --log-interval 0
row 0 "--micro-batch-size 0: must be >= 1" run --micro-batch-size 0
row 0 "--num-attention-heads -4: must be >= 1" run --num-attention-heads -4
row 0 "--num-layers 0: must be >= 1" run --num-layers 0
row 0 "--seq-length 0: must be >= 1" run --seq-length 0
row 0 "--grad-bucket-size 0: must be >= 1" run --grad-bucket-size 0
row 0 "--tensor-model-parallel-size 0: must be >= 1" run --tensor-model-parallel-size 0
row 0 "--hidden-size 3000000000: must be <= 2147483647" run --hidden-size 3000000000
row 0 "--lr-warmup-iters -1: must be >= 0" run --lr-warmup-iters -1
row 0 "--lr nan: must be a finite number" run --lr nan
row 0 "--min-lr -1: must be >= 0" run --min-lr -1
row 0 "--clip-grad -1: must be >= 0" run --clip-grad -1
row 0 "--weight-decay -0.1: must be >= 0" run --weight-decay -0.1
row 0 "--loss-scale 0: must be > 0" run --loss-scale 0
row 0 "--exit-duration-in-mins 0: must be > 0" run --exit-duration-in-mins 0
row 0 "--seed -1: must be >= 0" run --seed -1

# ---- loopgate run: names, contradictions, flags that would be ignored ----
row 0 "--fixture: unknown fixture 'nope'" run --fixture nope
row 0 "--arm: unknown arm 'syncfre'" run --arm syncfre
row 0 "--lr-decay-style 'cosin': must be one of" run --lr-decay-style cosin
row 0 "--reduce-order 'random': must be one of native, fixed, permuted" run --reduce-order random
row 0 "--on-fault 'retry': must be one of abort, skip" run --on-fault retry
row 0 "--sequence-parallel and --no-sequence-parallel: give one" run --sequence-parallel --no-sequence-parallel
row 0 "--loss-scale 8 and --dynamic-loss-scale: give one" run --loss-scale 8 --dynamic-loss-scale
row 0 "--permute-seed 3: applies only with --reduce-order permuted" run --permute-seed 3
row 0 "--simulated-minutes-per-iteration 1: applies only with --exit-duration-in-mins" run --simulated-minutes-per-iteration 1
row 0 "--lr-decay-style WSD needs --lr-wsd-decay-iters" run --lr-decay-style WSD
row 0 "--device 'tpu': must be cpu or cuda" run --device tpu
row 0 "The following arguments were not expected: 5 --iter" run --iter 5

# ---- loopgate run: flags together, against the job ----
row 0 "--fixture tp2sp needs 2 ranks (mpirun -np 2); this job has 1" run --fixture tp2sp
row 0 "--tensor-model-parallel-size 2 x --pipeline-model-parallel-size (fixture default 1) = 2 does not divide the job's 1 rank" run --tensor-model-parallel-size 2
row 0 "--hidden-size 65 is not divisible by --num-attention-heads (fixture default 4)" run --hidden-size 65
row 0 "--global-batch-size 7 is not divisible by --micro-batch-size (fixture default 2)" run --global-batch-size 7
row 0 "--lr 1e-05 must be >= --min-lr (fixture default 0.0001)" run --lr 1e-5
row 0 "--lr-decay-iters 12, --lr-warmup-iters 12: the LR warmup (--lr-warmup-iters 12) must be shorter than the decay (--lr-decay-iters 12)" run --lr-warmup-iters 12 --lr-decay-iters 12
row 2 "sequence parallel (fixture default) needs --seq-length 31 divisible by --tensor-model-parallel-size (fixture default 2)" run --fixture tp2sp --seq-length 31
row 2 "--num-layers 3 is not divisible by --pipeline-model-parallel-size (fixture default 2)" run --fixture pp2 --num-layers 3
row 1 "--fixture pp2 needs 2 ranks (mpirun -np 2); this job has 1" run --fixture pp2
row 2 "--iters -5: must be >= 1" run --fixture pp2 --iters -5

# ---- loopgate run: --inject against the run ----
row 0 "iter=10 is past the run: --iters (fixture default 10) runs iterations 0-9 (inject's iter counts from 0)" run --inject 'iter=10,site=grad'
row 0 "--inject spec 2 of 2 ('iter=12,site=grad,kind=nan'): iter=12 is past the run" run --inject 'iter=1,site=loss;iter=12,site=grad'
row 0 "--inject 'iter=3,site=grad,bucket=13,rank=0': bucket=13 is beyond rank 0's 13 grad buckets (0-12)" run --inject 'iter=3,site=grad,bucket=13,rank=0'
row 0 "bucket=3 is beyond rank 0's 3 grad buckets (0-2) with --grad-bucket-size 100000" run --grad-bucket-size 100000 --inject 'iter=1,site=grad,bucket=3'
row 2 "--inject 'iter=1,site=grad,bucket=7': bucket=7 is beyond rank 0's 7 grad buckets (0-6)" run --fixture pp2 --inject 'iter=1,site=grad,bucket=7'
row 2 "--inject 'iter=1,site=loss,rank=0': rank=0 holds pipeline stage 0 of 2, which computes no loss" run --fixture pp2 --inject 'iter=1,site=loss,rank=0'
row 0 "--inject 'iter=1,site=loss,mb=4': mb=4 is beyond the 4 microbatches" run --inject 'iter=1,site=loss,mb=4'
row 0 "--inject: fault spec 'iter=x,site=loss': field 'iter': 'x' is not an integer" run --inject 'iter=x,site=loss'
row 0 "--capture-probe forward_backward@2: needs --device cuda" run --capture-probe forward_backward@2
row 0 "--cuda-graph iteration: needs --device cuda" run --cuda-graph iteration --arm zerosync --log-interval 4
row 0 "--cuda-graph 'whole': must be iteration" run --cuda-graph whole
row 0 "--stress 1: needs --device cuda" run --stress 1
row 0 "--async-emulation 3: emulates on CPU" run --async-emulation 3 --device cuda
row 0 "--cpu-comm shm: applies only on CPU" run --cpu-comm shm --device cuda
row 0 "--cuda-graph iteration with --dynamic-loss-scale" run --cuda-graph iteration --dynamic-loss-scale --arm zerosync --log-interval 4
row 0 "--cuda-graph iteration: needs --device cuda" ab --arms baseline,zerosync --cuda-graph iteration
row 0 "--device cuda: this loopgate was built without the GPU tier" run --device cuda  # the CPU build (label cpu)
row 0 "--cupti needs --device cuda" run --cupti
row 0 "--profile needs --device cuda" run --profile
row 0 "--profile needs --device cuda" run --device cpu --profile --arm syncfree

# ---- loopgate run: checkpoints (saves fall after iteration 1, at a log point or between two) ----
row 0 "--save-interval 4: applies only with --save" run --save-interval 4
row 0 "--save-interval 1: a save falls after iteration 1" run --save "$WORK/ck" --save-interval 1 --log-interval 2
row 0 "--exit-interval 1: a save falls after iteration 1" run --save "$WORK/ck" --exit-interval 1
row 0 "--save-interval 0: must be >= 1" run --save "$WORK/ck" --save-interval 0
row 0 "--load $WORK/none/latest_checkpointed_iteration.txt" run --load "$WORK/none"
row 0 "--save /etc/hostname/ck: /etc/hostname is not a directory" run --save /etc/hostname/ck

# ---- loopgate run: output paths (checked before any work; every rank agrees) ----
row 0 "--trace $WORK: is a directory" run --trace "$WORK"
row 0 "--trace '': needs a value" run --trace ''
row 2 "--trace $SRC/README.md/t.json: $SRC/README.md is not a directory" run --fixture tp2sp --trace "$SRC/README.md/t.json"

# ---- loopgate gate ----
row 0 "--iters 0: must be >= 1" gate --iters 0 --json "$WORK/gate.json"
row 0 "--iters 2: the single fixture's LR warmup is 2 iterations" gate --iters 2 --fixture single --check equivalence
row 0 "--iters 3: the lr_schedule gate skips a step at iteration 4" gate --iters 3
row 0 "--iters 201: the lr_schedule gate compares with the 200 iterations" gate --iters 201 --fixture single
row 0 "--fixture: unknown fixture 'dp6'" gate --fixture single,dp6
row 0 "--arm: unknown arm 'onesink'" gate --arm onesink
row 0 "--check 'equivalance': unknown gate" gate --check equivalance
row 0 "--cpus -1: must be in 0..1024" gate --cpus -1
row 0 "LOOPGATE_STALL_TIMEOUT='5s': must be a number of seconds >= 0" LOOPGATE_STALL_TIMEOUT=5s gate --fixture single
row 0 "--shards -1: must be in 0..64 (0: auto)" gate --shards -1
row 0 "--shards 65: must be in 0..64 (0: auto)" gate --shards 65
row 0 "Could not convert: --shards = two" gate --shards two
row 0 "--device 'gpu': must be cpu or cuda" gate --device gpu
row 0 "--check ledger_cupti: a GPU-only check (needs --device cuda)" gate --check ledger_cupti
row 0 "--device cuda: this loopgate was built without the GPU tier" gate --device cuda
row 0 "--device 'gpu': must be cpu or cuda" selftest --device gpu
row 0 "--device cuda: this loopgate was built without the GPU tier" selftest --device cuda
row 0 "--json $WORK/no-such-dir/g.json: directory $WORK/no-such-dir does not exist" gate --json "$WORK/no-such-dir/g.json"
row 0 "--junit $WORK: is a directory" gate --junit "$WORK"
row 0 "--mpiexec 'no-such-mpiexec': 'no-such-mpiexec' is not on PATH" gate --mpiexec no-such-mpiexec
row 0 "--suites-exe $WORK/none: the gate suites executable is missing" gate --suites-exe "$WORK/none"

# ---- loopgate golden (golden/ must not change: hashed before and after the table) ----
row 0 "golden: give exactly one of --check or --update" golden
row 0 "golden: give exactly one of --check or --update (got both)" golden --check --update
row 0 "--fixture: unknown fixture 'nope'" golden --update --fixture nope
row 0 "--mpiexec '$WORK/mpiexec': not an executable file" golden --update --mpiexec "$WORK/mpiexec"
row 0 "--golden-dir $WORK: lr_sequences.json is missing" golden --check --golden-dir "$WORK"
row 0 "--golden-dir $SRC/README.md/golden: $SRC/README.md is not a directory" golden --update --golden-dir "$SRC/README.md/golden"
row 0 "--device 'gpu': must be cpu or cuda" golden --check --device gpu
row 0 "--device cuda: this loopgate was built without the GPU tier" golden --update --device cuda  # the CPU build

# ---- loopgate report ----
row 0 "--gate $WORK/none.json: cannot read the file" report --gate "$WORK/none.json"
row 0 "--gate $WORK: is a directory" report --gate "$WORK"
row 0 "--out $WORK/no-such-dir/r.html: directory $WORK/no-such-dir does not exist" report --gate "$SRC/README.md" --out "$WORK/no-such-dir/r.html"
row 0 "--gate: '$SRC/README.md' is not JSON" report --gate "$SRC/README.md" --out "$WORK/r.html"

# ---- loopgate ab ----
row 0 "B $WORK/none.log: cannot read the file" ab "$EX/baseline_run1.log" "$WORK/none.log"
row 0 "--alpha 2: must be in (0, 1)" ab "$EX/baseline_run1.log" "$EX/candidate_run1.log" --alpha 2 --json "$WORK/ab.json"
row 0 "--window -1: must be >= 0" ab "$EX/baseline_run1.log" "$EX/candidate_run1.log" --window -1
row 0 "--time-source 'clock': must be auto, timestamps or elapsed" ab "$EX/baseline_run1.log" "$EX/candidate_run1.log" --time-source clock
row 0 "--json $WORK: is a directory" ab "$EX/baseline_run1.log" "$EX/candidate_run1.log" --json "$WORK"
row 0 "--profile needs --device cuda" ab --arms baseline,syncfree --profile
row 0 "--arms: 'onesync:lean': the suffixes are :bare" ab --arms onesync,onesync:lean
row 0 "--arms: unknown arm 'onesnc'" ab --arms onesnc:bare,onesync
row 0 "--profile: ab profiles the device only in-process" ab "$EX/baseline_run1.log" "$EX/candidate_run1.log" --profile

# ---- loopgate compare ----
row 0 "--b $WORK/none.log: cannot read the file" compare --a "$EX/baseline_run1.log" --b "$WORK/none.log" --json "$WORK/cmp.json"
row 0 "--early 0: must be >= 1" compare --a "$EX/baseline_run1.log" --b "$EX/candidate_run1.log" --early 0
row 0 "--warmup-windows -2: must be >= 0" compare --a "$EX/baseline_run1.log" --b "$EX/candidate_run1.log" --warmup-windows -2
row 0 "--a is required" compare --b "$EX/candidate_run1.log"

# ---- no or unknown subcommand ----
row 0 "a subcommand is required: run, gate, golden, ab, compare, report"
row 0 "unknown subcommand 'rnu'" rnu --iters 5

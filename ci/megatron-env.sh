# Sourced by ci/megatron-*.sh: real Megatron-LM on one GPU, with PyTorch alone (no Transformer Engine, no Apex).
#   megatron_helpers CHECKOUT   compiles the dataset index helper once (megatron/core/datasets/Makefile's rule)
#   MEGATRON_ARGS               the small GPT the docs measure (4 layers x 512, sequence 1024, global batch 16, 30
#                               iterations, bf16, mock data), plus $MEGATRON_EXTRA_ARGS
megatron_helpers() {
  (cd "$1/megatron/core/datasets" &&
    suffix=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))") &&
    { [ -f "helpers_cpp$suffix" ] || g++ -O3 -shared -std=c++17 -fPIC $(python3 -m pybind11 --includes) helpers.cpp \
        -o "helpers_cpp$suffix"; })
}
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-29517}
export CUDA_DEVICE_MAX_CONNECTIONS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
MEGATRON_ARGS=(--transformer-impl local --no-persist-layer-norm --no-masked-softmax-fusion
  --no-gradient-accumulation-fusion --deterministic-mode --mock-data --tokenizer-type NullTokenizer --vocab-size 8192
  --bf16 --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024
  --micro-batch-size 4 --global-batch-size 16 --train-iters ${MEGATRON_ITERS:-30} --lr 1.0e-4 --min-lr 1.0e-5
  --lr-decay-style cosine --lr-warmup-iters 5 --log-interval 1 --eval-iters 0 --eval-interval 1000 --split 949,50,1
  --seed 1234 --log-params-norm --log-num-zeros-in-grad --distributed-backend nccl ${MEGATRON_EXTRA_ARGS:-})

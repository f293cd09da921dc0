#!/usr/bin/env bash
# The main job: install what is missing, build, make the reference data, run
# W1, W2, W5a and W3 in-process and W2 through the service, and run them beside their peers (torch DataLoader; for W2
# also tf.data, installed on first use into its own virtual environment).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh
scripts/build.sh
SLUICE=build/src/sluice/cli/sluice
BENCH=build/bench/tool/sluice-bench

[[ -f data/mnist/MNIST/raw/train-images-idx3-ubyte ]] || $SLUICE make-data mnist --out data/mnist
[[ -f data/cifar10/train-00000-of-00008.tfrecord ]] || $SLUICE make-data cifar10 --out data/cifar10
[[ -d data/imagenet ]] || $SLUICE make-data imagenet --out data/imagenet

echo
echo "== The pipelines, run in-process (pipelines/*.json)"
$SLUICE run pipelines/w1_mnist.json --epochs 3
$SLUICE run pipelines/w2_cifar10.json --epochs 3
$SLUICE run pipelines/w5a_cifar10.json --epochs 3
$SLUICE run pipelines/w3_imagenet.json --epochs 2

echo
echo "== W2 with its prefix (parse, dilation, blur) on the service: an embedded"
echo "   dispatcher and one local worker process (pipelines/w2_service.json)"
$SLUICE run pipelines/w2_service.json --epochs 3

echo
echo "== W1 and W2 beside their peers (median of ${RUNS:-3} runs)"
$BENCH w1 --runs "${RUNS:-3}"
$BENCH w2 --runs "${RUNS:-3}"

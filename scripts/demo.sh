#!/usr/bin/env bash
# The demo: install, build, generate a small K3-architecture checkpoint with
# RANDOM weights, validate it, show the chat template's tokens, and generate.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
bin=build/release/deltafin
model=demo-model

echo
echo "== 1. generate a small checkpoint in the real Hugging Face K3 layout (random weights) =="
$bin make-model --out "$model" --preset small --seed 1 --force
echo
echo "== 2. load and validate it (config rules, every tensor's dtype and shape, MXFP4 scales) =="
$bin inspect --model "$model" --verify-experts
echo
echo "== 3. render a chat prompt with the K3 template and tokenize it =="
$bin tokenize --model "$model" --chat --render --text "What is the capital of France?"
echo
echo "== 4. generate 32 tokens (greedy, exact fp32 forward pass, all weights in RAM) =="
$bin run --model "$model" --chat --prompt "What is the capital of France?" --max-new 32 --ignore-eos --stats
echo
echo "Note: the weights are random, so this model has K3's shape but no knowledge: the text is noise."

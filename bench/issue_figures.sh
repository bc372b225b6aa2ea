#!/usr/bin/env bash
# The measurements behind the closing notes of the GPT and ELMo issues, in sequence:
# the GPT configs trained from the CPU-pretrained GPT, ELMo pretraining and the ELMo
# NER config trained from it. (Speed: bench/gpt_generation.py, run on a quiet machine.) Needs corpus/ (see README)
# and training/gpt_pretrain/final (python -m spacy bertfam-pretrain configs/pretrain_gpt.cfg training/gpt_pretrain).
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
out=bench/results
runs=training/figures  # apart from the workflow's training/<run> folders
mkdir -p "$out" "$runs"
export OMP_NUM_THREADS="${THREADS:-2}" MKL_NUM_THREADS="${THREADS:-2}"
for task in textcat ner; do
  case $task in
    textcat) train=corpus/banking77/train.spacy dev=corpus/banking77/dev.spacy ;;
    ner) train=corpus/wnut17_train.spacy dev=corpus/wnut17_dev.spacy ;;
  esac
  $py -m spacy train configs/${task}_gpt.cfg --output $runs/${task}_gpt --paths.train $train --paths.dev $dev \
      --paths.gpt_checkpoint training/gpt_pretrain/final > $runs/${task}_gpt.log 2>&1
  $py -m spacy evaluate $runs/${task}_gpt/model-last $dev --output "$out/${task}_gpt.json" | tail -20
done
if [ ! -d training/elmo_pretrain/final ]; then
  $py -m spacy bertfam-pretrain configs/pretrain_elmo.cfg training/elmo_pretrain \
      --paths.train ../shared/data/raw_text/janeausten_6novels.txt \
      --training.max_minutes "${ELMO_MINUTES:-12}" > training/elmo_pretrain.log 2>&1
fi
$py -m spacy train configs/ner_elmo.cfg --output $runs/ner_elmo --paths.train corpus/wnut17_train.spacy \
    --paths.dev corpus/wnut17_dev.spacy --paths.elmo_checkpoint training/elmo_pretrain/final > $runs/ner_elmo.log 2>&1
$py -m spacy evaluate $runs/ner_elmo/model-last corpus/wnut17_dev.spacy --output "$out/ner_elmo.json" | tail -20

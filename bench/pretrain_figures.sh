#!/usr/bin/env bash
# The measurements behind the pretraining issue's closing note, in sequence, on a quiet
# machine (2 threads): (1) a small BERT from scratch on assets/raw_text for a 15-minute
# budget; (2) continued pretraining of MiniLM on the same text; (3) WNUT-17 NER with
# configs/ner.cfg starting from (2), seeds 0 and 1, to set beside the packaged-MiniLM
# runs in bench/results/accuracy.md. Needs corpus/ (see README) and the MiniLM weights.
# Masking/NSP statistics and the 2-process DDP figure: pytest -s tests/pretraining.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
runs=bench/runs
out=bench/results
mkdir -p "$runs" "$out"
export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
minilm=$($py -c "from spacy_bertfam.pretrained import pretrained_path; print(pretrained_path('all-MiniLM-L6-v2'))")
if [ ! -d $runs/bert_scratch/final ]; then
  $py -m spacy bertfam-pretrain configs/pretrain_bert.cfg $runs/bert_scratch --training.max_steps 1000 \
      --training.max_minutes 15 --training.lr 0.0005 --training.warmup_steps 100 --training.eval_every 100 \
      --training.checkpoint_every 100 > $runs/bert_scratch.out 2>&1
fi
if [ ! -d $runs/minilm_adapted/final ]; then
  $py -m spacy bertfam-pretrain configs/pretrain_bert.cfg $runs/minilm_adapted --paths.init "$minilm" \
      --training.max_steps 480 --training.max_minutes 12 --training.batch_size 16 --training.warmup_steps 48 \
      --training.eval_every 80 --training.checkpoint_every 80 > $runs/minilm_adapted.out 2>&1
fi
$py bench/pretrain_summary.py bert_scratch minilm_adapted | tee $out/pretraining.md
for seed in 0 1; do
  $py -m spacy train configs/ner.cfg --output $runs/ner_adapted_s$seed --paths.train corpus/wnut17_train.spacy \
      --paths.dev corpus/wnut17_dev.spacy --paths.encoder_checkpoint $runs/minilm_adapted/final \
      --system.seed $seed > $runs/ner_adapted_s$seed.log 2>&1
  $py -m spacy evaluate $runs/ner_adapted_s$seed/model-last corpus/wnut17_dev.spacy \
      --output $out/ner_adapted_s$seed.json | grep -E "^(NER P|NER R|NER F)"
done

#!/bin/sh
# ABC pipeline per task at fixed pad width 64, identity encoder
set -x
A=.venv/bin/abcmini
for task in successor addition nx1; do
  $A train --task $task --method vanilla --pad-width 64 --enc-layers 0 --steps 6000 --stop-at 0.995 --out runs/p64/$task-vanilla --resume --no-wandb || continue
  $A calibrate runs/p64/$task-vanilla --no-wandb || continue
  $A train --task $task --method vanilla --bias runs/p64/$task-vanilla/abc_bias.pt --pad-width 64 --enc-layers 0 --steps 3000 --stop-at 0.999 --out runs/p64/$task-abc --resume --no-wandb --eval-lengths 6,10,20,60
  $A eval runs/p64/$task-vanilla --lengths 6,10,20,60 --no-wandb
done

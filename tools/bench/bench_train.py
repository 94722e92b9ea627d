# Benchmark-only (scripts/bench-train.sh runs it after bench_train): the issue-15 CNN's
# training step (batch 128, Adam, cross-entropy) in PyTorch from Python, Debian's
# python3-torch, on the same thread count; prints the median step and images/s.
import argparse
import time

import torch
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--steps", type=int, default=15)
args = ap.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(42)


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 32, 3, padding=1)
        self.c2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.f1 = torch.nn.Linear(3136, 128)
        self.f2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f2(F.relu(self.f1(x.flatten(1))))


net = Cnn()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
x = torch.randn(128, 1, 28, 28)
y = torch.arange(128) % 10


def step():
    opt.zero_grad()
    loss = F.cross_entropy(net(x.clone()), y)
    loss.backward()
    opt.step()
    return loss.item()


for _ in range(3):
    step()
times = []
for _ in range(args.steps):
    t0 = time.perf_counter()
    step()
    times.append(time.perf_counter() - t0)
times.sort()
med = times[len(times) // 2]
print(f"PyTorch {torch.__version__} (python3-torch), {args.threads} threads: CNN train step batch 128 "
      f"{med * 1e3:.2f} ms, {128 / med:.0f} images/s (median of {args.steps})")

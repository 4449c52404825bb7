#!/usr/bin/env python3
"""Draws the notebooks' diagrams as PNG files (Pillow and the DejaVu font, as the plots use):

    .venv/bin/python scripts/dev/diagrams.py      ->  notebooks/figures/*.png

ddp.png (notebook 02): how one DDP step runs on two ranks. checkpoints.png (notebook 04): a
crashed run restarting from its last checkpoint. torchrun.png (04), ray.png (05), dask.png (06):
who starts the ranks under each launcher, who hosts the store they meet at, and what each rank
is told. The PNGs are committed; rerun this script after changing it.
"""
import pathlib

from PIL import Image, ImageDraw, ImageFont

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
OUT = ROOT / "notebooks" / "figures"
FONT_DIRS = [pathlib.Path("/usr/share/fonts/truetype/dejavu"),
             ROOT / ".venv/debs/usr/share/fonts/truetype/dejavu"]
BLUE, RED, GREY, INK = (66, 113, 196), (214, 86, 70), (235, 235, 235), (30, 30, 30)
PALE_BLUE, PALE_RED, PALE_GREEN = (222, 232, 250), (250, 226, 222), (224, 243, 226)


def font(size, bold=False):
    name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
    for d in FONT_DIRS:
        if (d / name).exists():
            return ImageFont.truetype(str(d / name), size)
    raise SystemExit(f"{name} not found in {[str(d) for d in FONT_DIRS]}")


def box(draw, xy, text, fill, size=17, bold=False):
    draw.rounded_rectangle(xy, radius=10, fill=fill, outline=INK, width=2)
    x0, y0, x1, y1 = xy
    draw.multiline_text(((x0 + x1) / 2, (y0 + y1) / 2), text, fill=INK, font=font(size, bold),
                        anchor="mm", align="center", spacing=4)


def arrow(draw, start, end, color=INK, width=3):
    draw.line([start, end], fill=color, width=width)
    (x0, y0), (x1, y1) = start, end
    length = max(((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5, 1e-9)
    ux, uy = (x1 - x0) / length, (y1 - y0) / length
    head = [(x1, y1), (x1 - 14 * ux + 7 * uy, y1 - 14 * uy - 7 * ux),
            (x1 - 14 * ux - 7 * uy, y1 - 14 * uy + 7 * ux)]
    draw.polygon(head, fill=color)


def ddp():
    img = Image.new("RGB", (1000, 690), "white")
    d = ImageDraw.Draw(img)
    d.text((500, 28), "One training step of DDP on two ranks", fill=INK, font=font(24, True),
           anchor="mm")
    # The data set, shuffled with the epoch's seed, dealt to the ranks in turn.
    d.text((500, 70), "the epoch's shuffled order (the same on every rank: set_epoch)", fill=INK,
           font=font(16), anchor="mm")
    for i in range(8):
        x = 260 + i * 60
        d.rectangle((x, 88, x + 52, 128), fill=PALE_BLUE if i % 2 == 0 else PALE_RED,
                    outline=INK, width=2)
        d.text((x + 26, 108), str(i), fill=INK, font=font(16), anchor="mm")
    d.text((500, 146), "DistributedSampler: rank 0 takes positions 0, 2, 4, ...; rank 1 takes 1, 3, 5, ...",
           fill=INK, font=font(15), anchor="mm")
    for rank, (x, pale, color) in enumerate([(110, PALE_BLUE, BLUE), (590, PALE_RED, RED)]):
        d.text((x + 150, 182), f"rank {rank}", fill=color, font=font(20, True), anchor="mm")
        arrow(d, (x + 150, 196), (x + 150, 220), color)
        box(d, (x, 222, x + 300, 272), "its own batch (half the samples)", pale)
        arrow(d, (x + 150, 272), (x + 150, 296), color)
        box(d, (x, 298, x + 300, 358), "model replica\n(same weights on both ranks)", pale)
        arrow(d, (x + 150, 358), (x + 150, 382), color)
        box(d, (x, 384, x + 300, 434), "forward, loss, backward", pale)
        arrow(d, (x + 150, 434), (x + 150, 458), color)
        box(d, (x, 460, x + 300, 510), "its own gradients", pale)
        arrow(d, (x + 150, 580), (x + 150, 600), color)
        box(d, (x, 600, x + 300, 640), "optimizer step", pale, size=16)
    # The all-reduce joins the two columns.
    box(d, (180, 526, 820, 578),
        "all-reduce: the gradients are averaged over the ranks, bucket by bucket,\n"
        "while backward still runs; both ranks end with the same average", PALE_GREEN, size=15)
    for x in (260, 740):
        arrow(d, (x, 510), (x, 526))
    d.text((500, 666), "same weights + same averaged gradients = the same step: the replicas stay equal",
           fill=INK, font=font(16), anchor="mm")
    img.save(OUT / "ddp.png")


def checkpoints():
    img = Image.new("RGB", (1000, 400), "white")
    d = ImageDraw.Draw(img)
    d.text((500, 28), "A crash, a restart, and the work that is done twice (schematic)", fill=INK,
           font=font(22, True), anchor="mm")
    x0, scale = 140, 13  # optimizer step s sits at x0 + s * scale

    def x(step):
        return x0 + step * scale

    # First attempt: steps 0..9, checkpoints at 6, a crash at 9.
    d.text((x0 - 10, 110), "attempt 1", fill=INK, font=font(16, True), anchor="rm")
    d.line([(x(0), 110), (x(9), 110)], fill=BLUE, width=6)
    d.line([(x(9) - 10, 100), (x(9) + 10, 120)], fill=RED, width=4)
    d.line([(x(9) - 10, 120), (x(9) + 10, 100)], fill=RED, width=4)
    d.text((x(9) + 16, 110), "rank killed at step 9: torchrun restarts the group", fill=RED,
           font=font(15), anchor="lm")
    # Second attempt: resumes at the checkpoint of step 6, on to the end (step 58).
    d.text((x0 - 10, 200), "attempt 2", fill=INK, font=font(16, True), anchor="rm")
    d.rectangle((x(6), 186, x(9), 214), fill=PALE_RED)
    d.line([(x(6), 200), (x(58), 200)], fill=BLUE, width=6)
    d.text((x(7.5), 232), "steps 7-9\nagain", fill=RED, font=font(13), anchor="ma", align="center")
    arrow(d, (x(6), 124), (x(6), 186), INK, 2)
    d.text((x(6) + 8, 150), "restart: load the newest checkpoint", fill=INK, font=font(14),
           anchor="lm")
    for step in range(6, 59, 6):
        for y in ((110,) if step <= 9 else ()) + ((200,) if step > 6 else ()):
            d.polygon([(x(step), y - 11), (x(step) + 11, y), (x(step), y + 11), (x(step) - 11, y)],
                      fill=(250, 200, 60), outline=INK)
    # The axis.
    d.line([(x(0), 300), (x(58), 300)], fill=INK, width=2)
    for step in list(range(0, 59, 6)) + [58]:
        d.line([(x(step), 295), (x(step), 305)], fill=INK, width=2)
        d.text((x(step), 312), str(step), fill=INK, font=font(13), anchor="ma")
    d.text((x(29), 340), "optimizer steps (2 epochs of 29; a checkpoint every 6: the diamonds)", fill=INK,
           font=font(15), anchor="ma")
    d.text((500, 375), "What is lost is at most the steps since the last checkpoint, and they are "
           "trained again exactly as before.", fill=INK, font=font(14), anchor="mm")
    img.save(OUT / "checkpoints.png")


def launcher(name, title, head, head_note, middle, store_in_head, restart):
    """One launcher's picture: the process that starts the job (`head`), what sits between it and
    the ranks (`middle`: one box per rank, or None), the two rank processes, and the store they
    meet at (in the head process or in rank 0)."""
    img = Image.new("RGB", (1000, 480), "white")
    d = ImageDraw.Draw(img)
    d.text((500, 28), title, fill=INK, font=font(22, True), anchor="mm")
    box(d, (200, 56, 800, 126), head, PALE_GREEN, size=15)
    d.text((500, 134), head_note, fill=INK, font=font(14), anchor="ma")
    columns = [(80, PALE_BLUE, BLUE), (580, PALE_RED, RED)]
    top = 190
    if middle:
        for k, (x, _, _) in enumerate(columns):
            arrow(d, (500, 156), (x + 170, top), INK, 2)
            box(d, (x, top, x + 340, top + 50), middle.format(k=k), GREY, size=15)
        top += 80
    for k, (x, pale, color) in enumerate(columns):
        arrow(d, (x + 170, top - 30) if middle else (500, 156), (x + 170, top), INK, 2)
        text = f"rank {k}: the training program\nRANK={k}  WORLD_SIZE=2  LOCAL_RANK\nMASTER_ADDR  MASTER_PORT"
        box(d, (x, top, x + 340, top + 80), text, pale, size=14)
    y_store = top + 120
    if store_in_head:
        where = "the store (a TCPStore) lives in torchrun's agent: it outlives a crashed rank"
    else:
        where = "rank 0 opens the store (a TCPStore) at MASTER_ADDR:MASTER_PORT; rank 1 connects to it"
    d.text((500, y_store), where, fill=INK, font=font(15), anchor="mm")
    for x, color in ((250, BLUE), (750, RED)):
        d.line([(x, top + 80), (x, y_store - 14)], fill=color, width=2)
    d.text((500, y_store + 36), restart, fill=INK, font=font(14), anchor="mm")
    img.crop((0, 0, 1000, y_store + 64)).save(OUT / f"{name}.png")


def torchrun():
    launcher("torchrun", "Two ranks under torchrun (one machine)",
             "torchrun's agent: one process per machine\n(torchrun --standalone --nproc-per-node=2 --no-python PROGRAM)",
             "starts the workers and watches them, and hosts their store (TORCHELASTIC_USE_AGENT_STORE=True)",
             None, True, "a worker dies: the agent stops the other and, under --max-restarts=N, starts both again")


def ray():
    launcher("ray", "Two ranks under Ray (launchers/ray_launch.py)",
             "the driver: ray_launch.py (a Ray cluster, local or --address)",
             "reserves one bundle of CPUs (and GPUs) per rank, a placement group, and starts an actor in each",
             "actor {k}: runs the program\nwith the variables below", False,
             "a rank fails: with --max-failures N the driver starts the whole group again, which resumes")


def dask():
    launcher("dask", "Two ranks under Dask (launchers/dask_launch.py)",
             "the client: dask_launch.py (a local cluster, or --scheduler tcp://...)",
             "submits one task per rank to the scheduler, each pinned to a worker of its own",
             "worker {k}: a task that runs\nthe program with the variables below", False,
             "each task's future brings its rank's outcome (exit status and reports) back to the client")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for draw in (ddp, checkpoints, torchrun, ray, dask):
        draw()
    print(f"wrote ddp, checkpoints, torchrun, ray and dask .png under {OUT}")

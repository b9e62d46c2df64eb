"""The polyhedral view of the loop level: isl sets and maps for loop nests, footprints,
tiling, post-tiling fusion and storage reduction (Zhao & Di, MICRO 2020).

- islconv: loop IR <-> islpy (the only module that converts between them)
- footprint: upwards-exposed footprints, extension domains, scratch boxes
- program: buffer uses, dependences between top-level ops, IR surgery helpers
- startup: minfuse-like start-up fusion (copy forwarding, pointwise merging)
- tiling: tiling live-out spaces into parallel `loop.band`s
- fusion: post-tiling fusion of producers into tile bands
- storage: tile-local scratch buffers sized from footprints
"""

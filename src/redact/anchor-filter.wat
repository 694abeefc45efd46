;; The vector pass of anchor-filter.ts: which 16-byte blocks of a chunk may hold an anchor (a literal that every
;; credential format starts from). Each anchor is reduced to its first four bytes, and each anchor belongs to one of
;; eight buckets (the bits of a byte). For byte position j of an anchor, two 16-entry tables give the buckets whose
;; anchors admit a byte with that low nibble and that high nibble (i8x16.swizzle is the lookup, sixteen bytes at a
;; time). A position of the text can END an anchor's first four bytes for a bucket when its byte is admitted at j = 3,
;; the byte before at j = 2, and so on: each block is loaded and looked up once, and the lookups of the three bytes
;; before a position come from this block's and the previous block's, joined by a shuffle (palignr), as Teddy does.
;; The pass is a filter: a hit is verified byte by byte in JavaScript.
;;
;; Memory layout (filled by anchor-filter.ts):
;;   0..127   the eight tables: low then high nibble, for byte positions 0, 1, 2 and 3
;;   128..143 the bucket masks of the 16 positions of the block last returned (by the position an anchor's fourth
;;            byte would be at)
;;   160..    the chunk of text, then zeros
;;
;; Built into anchor-filter-wasm.ts by scripts/build-wasm.mjs; a test checks that file against this one.
(module
  (memory (export "memory") 5)
  ;; The offset (from the start of the chunk) of the first block at or after `at` and before `end` where some position
  ;; may end an anchor's first four bytes, with that block's masks stored at 128; -1 when there is none. `at` is a
  ;; multiple of 16; at 0 nothing comes before the block, else the previous block is looked up again.
  (func (export "scan") (param $at i32) (param $end i32) (result i32)
    (local $l1 v128) (local $h1 v128) (local $l2 v128) (local $h2 v128)
    (local $l3 v128) (local $h3 v128)
    (local $nibble v128) (local $text v128) (local $low v128) (local $high v128) (local $mask v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $p0 v128) (local $p1 v128) (local $p2 v128)
    ;; Position 0's tables are read from memory at each use, the others are held: with all eight held, the loop needs
    ;; more than x64's 16 vector registers and V8 spills, which cost a quarter of the pass.
    (local.set $l1 (v128.load offset=32 (i32.const 0)))
    (local.set $h1 (v128.load offset=48 (i32.const 0)))
    (local.set $l2 (v128.load offset=64 (i32.const 0)))
    (local.set $h2 (v128.load offset=80 (i32.const 0)))
    (local.set $l3 (v128.load offset=96 (i32.const 0)))
    (local.set $h3 (v128.load offset=112 (i32.const 0)))
    (local.set $nibble (i8x16.splat (i32.const 15)))
    (if (i32.ne (local.get $at) (i32.const 0))
      (then
        (local.set $text (v128.load offset=144 align=1 (local.get $at)))
        (local.set $low (v128.and (local.get $text) (local.get $nibble)))
        (local.set $high (i8x16.shr_u (local.get $text) (i32.const 4)))
        (local.set $p0 (v128.and (i8x16.swizzle (v128.load offset=0 (i32.const 0)) (local.get $low)) (i8x16.swizzle (v128.load offset=16 (i32.const 0)) (local.get $high))))
        (local.set $p1 (v128.and (i8x16.swizzle (local.get $l1) (local.get $low)) (i8x16.swizzle (local.get $h1) (local.get $high))))
        (local.set $p2 (v128.and (i8x16.swizzle (local.get $l2) (local.get $low)) (i8x16.swizzle (local.get $h2) (local.get $high))))))
    (block $none
      (loop $blocks
        (br_if $none (i32.ge_u (local.get $at) (local.get $end)))
        (local.set $text (v128.load offset=160 align=1 (local.get $at)))
        (local.set $low (v128.and (local.get $text) (local.get $nibble)))
        (local.set $high (i8x16.shr_u (local.get $text) (i32.const 4)))
        (local.set $a0 (v128.and (i8x16.swizzle (v128.load offset=0 (i32.const 0)) (local.get $low)) (i8x16.swizzle (v128.load offset=16 (i32.const 0)) (local.get $high))))
        (local.set $a1 (v128.and (i8x16.swizzle (local.get $l1) (local.get $low)) (i8x16.swizzle (local.get $h1) (local.get $high))))
        (local.set $a2 (v128.and (i8x16.swizzle (local.get $l2) (local.get $low)) (i8x16.swizzle (local.get $h2) (local.get $high))))
        (local.set $a3 (v128.and (i8x16.swizzle (local.get $l3) (local.get $low)) (i8x16.swizzle (local.get $h3) (local.get $high))))
        ;; Position i ends a match when byte i passes table 3, byte i-1 table 2, byte i-2 table 1 and byte i-3 table 0.
        (local.set $mask
          (v128.and
            (v128.and (local.get $a3)
              (i8x16.shuffle 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 (local.get $p2) (local.get $a2)))
            (v128.and
              (i8x16.shuffle 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 (local.get $p1) (local.get $a1))
              (i8x16.shuffle 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 (local.get $p0) (local.get $a0)))))
        (local.set $p0 (local.get $a0))
        (local.set $p1 (local.get $a1))
        (local.set $p2 (local.get $a2))
        (if (v128.any_true (local.get $mask))
          (then
            (v128.store offset=128 (i32.const 0) (local.get $mask))
            (return (local.get $at))))
        (local.set $at (i32.add (local.get $at) (i32.const 16)))
        (br $blocks)))
    (i32.const -1)))

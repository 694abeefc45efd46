;; The vector pass of anchor-filter.ts: which 16-byte blocks of a chunk may hold an anchor (a literal that every
;; credential format starts from). Each anchor is reduced to its first four bytes, and each anchor belongs to one of
;; eight buckets (the bits of a byte). For byte position j of an anchor, two 16-entry tables give the buckets whose
;; anchors admit a byte with that low nibble and that high nibble; a position of the text can start an anchor of a
;; bucket when its byte and the three after it are all admitted for that bucket. Sixteen positions are tested at once
;; with i8x16.swizzle as the table lookup. The pass is a filter: a hit is verified byte by byte in JavaScript.
;;
;; Memory layout (filled by anchor-filter.ts):
;;   0..127   the eight tables: low then high nibble, for byte positions 0, 1, 2 and 3
;;   128..143 the bucket masks of the 16 positions of the block last returned
;;   160..    the chunk of text, then zeros
;;
;; Built into anchor-filter-wasm.ts by scripts/build-wasm.mjs; a test checks that file against this one.
(module
  (memory (export "memory") 5)
  ;; The offset (from the start of the chunk) of the first block at or after `at` and before `end` where some position
  ;; may start an anchor, with that block's masks stored at 128; -1 when there is none.
  (func (export "scan") (param $at i32) (param $end i32) (result i32)
    (local $l0 v128) (local $h0 v128) (local $l1 v128) (local $h1 v128) (local $l2 v128) (local $h2 v128)
    (local $l3 v128) (local $h3 v128)
    (local $nibble v128) (local $text v128) (local $mask v128)
    (local.set $l0 (v128.load offset=0 (i32.const 0)))
    (local.set $h0 (v128.load offset=16 (i32.const 0)))
    (local.set $l1 (v128.load offset=32 (i32.const 0)))
    (local.set $h1 (v128.load offset=48 (i32.const 0)))
    (local.set $l2 (v128.load offset=64 (i32.const 0)))
    (local.set $h2 (v128.load offset=80 (i32.const 0)))
    (local.set $l3 (v128.load offset=96 (i32.const 0)))
    (local.set $h3 (v128.load offset=112 (i32.const 0)))
    (local.set $nibble (i8x16.splat (i32.const 15)))
    (block $none
      (loop $blocks
        (br_if $none (i32.ge_u (local.get $at) (local.get $end)))
        (local.set $text (v128.load offset=160 align=1 (local.get $at)))
        (local.set $mask
          (v128.and
            (i8x16.swizzle (local.get $l0) (v128.and (local.get $text) (local.get $nibble)))
            (i8x16.swizzle (local.get $h0) (i8x16.shr_u (local.get $text) (i32.const 4)))))
        (local.set $text (v128.load offset=161 align=1 (local.get $at)))
        (local.set $mask
          (v128.and (local.get $mask)
            (v128.and
              (i8x16.swizzle (local.get $l1) (v128.and (local.get $text) (local.get $nibble)))
              (i8x16.swizzle (local.get $h1) (i8x16.shr_u (local.get $text) (i32.const 4))))))
        (local.set $text (v128.load offset=162 align=1 (local.get $at)))
        (local.set $mask
          (v128.and (local.get $mask)
            (v128.and
              (i8x16.swizzle (local.get $l2) (v128.and (local.get $text) (local.get $nibble)))
              (i8x16.swizzle (local.get $h2) (i8x16.shr_u (local.get $text) (i32.const 4))))))
        (local.set $text (v128.load offset=163 align=1 (local.get $at)))
        (local.set $mask
          (v128.and (local.get $mask)
            (v128.and
              (i8x16.swizzle (local.get $l3) (v128.and (local.get $text) (local.get $nibble)))
              (i8x16.swizzle (local.get $h3) (i8x16.shr_u (local.get $text) (i32.const 4))))))
        (if (v128.any_true (local.get $mask))
          (then
            (v128.store offset=128 (i32.const 0) (local.get $mask))
            (return (local.get $at))))
        (local.set $at (i32.add (local.get $at) (i32.const 16)))
        (br $blocks)))
    (i32.const -1)))

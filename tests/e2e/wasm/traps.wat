;; traps.wat: the traps wasm2c has that C cannot write plainly (tests/e2e/wasm.sh).
(module
  (type $ii (func (param i32) (result i32)))
  (type $v (func))
  (table 2 funcref)
  (elem (i32.const 0) $id $nothing)
  (memory (export "memory") 1 3)
  (func $id (type $ii) local.get 0)
  (func $nothing (type $v))
  (func (export "unreachable") (result i32) unreachable)
  ;; call_indirect of table slot n as (i32) -> i32: slot 1 has another type, slot 5 is past the table
  (func (export "call_slot") (param i32) (result i32)
    i32.const 7 local.get 0 call_indirect (type $ii))
  (func (export "overflow") (param i32 i32) (result i32) local.get 0 local.get 1 i32.div_s)
  (func (export "truncate") (result i32) f64.const nan i32.trunc_f64_s)
  ;; memory.grow by n pages: the old size, or -1 past the maximum (3) or the heap
  (func (export "grow") (param i32) (result i32) local.get 0 memory.grow)
  (func (export "store_at") (param i32) (result i32) local.get 0 i32.const 1 i32.store i32.const 0))

#include "textflag.h"

// func prefetchLines(p *byte, n int)
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ AX, CX   // end
	ANDQ $-64, AX // from the start of p's line
loop:
	CMPQ AX, CX
	JAE  done
	// PREFETCHW (AX): 0F 0D /1. The Go assembler has no mnemonic for
	// it; CPUs without it (before Broadwell) run it as a NOP.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	ADDQ $64, AX
	JMP  loop
done:
	RET

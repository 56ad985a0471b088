        global  _start
        section .data
msg:    db      "héllo wörld ✓ 日本", 10
len:    equ     $ - msg
        section .text
_start: mov     eax, 1
        mov     edi, 1
        lea     rsi, [rel msg]
        mov     edx, len
        syscall
        mov     eax, 60
        xor     edi, edi
        syscall

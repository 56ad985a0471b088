        global  _start
        section .data
msg:    db      "Hello, World!", 10
len:    equ     $ - msg
        section .text
_start: mov     eax, 1              ; write(1, msg, len)
        mov     edi, 1
        lea     rsi, [rel msg]
        mov     edx, len
        syscall
        mov     eax, 60             ; exit(0)
        xor     edi, edi
        syscall

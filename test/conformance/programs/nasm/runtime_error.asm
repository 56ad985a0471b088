        global  _start
        section .data
msg:    db      "error: something went wrong", 10
len:    equ     $ - msg
        section .text
_start: mov     eax, 1              ; write(2, msg, len)
        mov     edi, 2
        lea     rsi, [rel msg]
        mov     edx, len
        syscall
        mov     eax, 60             ; exit(1)
        mov     edi, 1
        syscall

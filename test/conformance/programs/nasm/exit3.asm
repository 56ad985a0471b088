        global  _start
        section .text
_start: mov     eax, 60             ; exit(3)
        mov     edi, 3
        syscall

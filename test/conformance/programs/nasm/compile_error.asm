        global  _start
        section .text
_start: mov     eax, 60
        movx    edi, ebx, 3
        syscall

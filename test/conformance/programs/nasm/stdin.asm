        global  _start
        section .bss
buf:    resb    4096
        section .text
_start:
.loop:  xor     eax, eax            ; read(0, buf, 4096)
        xor     edi, edi
        lea     rsi, [rel buf]
        mov     edx, 4096
        syscall
        test    rax, rax
        jle     .done
        mov     rdx, rax            ; write(1, buf, n)
        mov     eax, 1
        mov     edi, 1
        lea     rsi, [rel buf]
        syscall
        jmp     .loop
.done:  mov     eax, 60
        xor     edi, edi
        syscall

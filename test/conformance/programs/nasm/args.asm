        global  _start
        section .data
nl:     db      10
        section .text
_start: mov     r12, [rsp]          ; argc
        lea     r13, [rsp + 16]     ; argv[1]
        dec     r12
.next:  test    r12, r12
        jz      .done
        mov     rsi, [r13]
        xor     edx, edx            ; strlen
.len:   cmp     byte [rsi + rdx], 0
        je      .print
        inc     rdx
        jmp     .len
.print: mov     eax, 1
        mov     edi, 1
        syscall
        mov     eax, 1
        mov     edi, 1
        lea     rsi, [rel nl]
        mov     edx, 1
        syscall
        add     r13, 8
        dec     r12
        jmp     .next
.done:  mov     eax, 60
        xor     edi, edi
        syscall

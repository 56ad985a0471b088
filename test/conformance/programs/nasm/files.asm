        global  _start
        section .data
inname: db      "input.txt", 0
outname: db     "output.txt", 0
        section .bss
buf:    resb    65536
        section .text
_start: mov     eax, 2              ; open("input.txt", O_RDONLY)
        lea     rdi, [rel inname]
        xor     esi, esi
        syscall
        test    rax, rax
        js      .fail
        mov     rdi, rax            ; read(fd, buf, 65536)
        xor     eax, eax
        lea     rsi, [rel buf]
        mov     edx, 65536
        syscall
        test    rax, rax
        js      .fail
        mov     r12, rax            ; n
        xor     ecx, ecx            ; uppercase a-z
        lea     rsi, [rel buf]
.up:    cmp     rcx, r12
        jae     .write
        mov     al, [rsi + rcx]
        cmp     al, 'a'
        jb      .skip
        cmp     al, 'z'
        ja      .skip
        sub     al, 32
        mov     [rsi + rcx], al
.skip:  inc     rcx
        jmp     .up
.write: mov     eax, 2              ; open("output.txt", O_WRONLY|O_CREAT|O_TRUNC, 0644)
        lea     rdi, [rel outname]
        mov     esi, 0x241
        mov     edx, 0o644
        syscall
        test    rax, rax
        js      .fail
        mov     rdi, rax            ; write(fd, buf, n)
        mov     eax, 1
        lea     rsi, [rel buf]
        mov     rdx, r12
        syscall
        mov     eax, 60
        xor     edi, edi
        syscall
.fail:  mov     eax, 60
        mov     edi, 1
        syscall

        global  _start
        section .text
_start: jmp     _start              ; forever

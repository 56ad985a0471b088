       IDENTIFICATION DIVISION.
       PROGRAM-ID. COPYIN.
       DATA DIVISION.
       WORKING-STORAGE SECTION.
       01 WS-N     BINARY-LONG.
       PROCEDURE DIVISION.
      *    Byte by byte through the C library: COBOL's line input would
      *    change trailing spaces and the final newline.
           PERFORM FOREVER
               CALL "getchar" RETURNING WS-N
               IF WS-N < 0
                   EXIT PERFORM
               END-IF
               CALL "putchar" USING BY VALUE WS-N
           END-PERFORM
           CALL "fflush" USING BY VALUE 0
           STOP RUN.

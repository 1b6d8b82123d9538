# proves: a C project builds and runs with make and gcc: parallel jobs,
# a static library made with ar, a shared library loaded through rpath,
# dependency files (-MMD), an incremental rebuild after a header changes,
# and gcc's temporary files in /tmp (-pipe off).
set -eux
mkdir -p src include build
cat > include/greet.h <<'C'
#define GREETING "hello"
const char *greet(void);
int add(int a, int b);
C
cat > src/greet.c <<'C'
#include "greet.h"
const char *greet(void) { return GREETING; }
C
cat > src/add.c <<'C'
#include "greet.h"
int add(int a, int b) { return a + b; }
C
cat > src/main.c <<'C'
#include <stdio.h>
#include <pthread.h>
#include "greet.h"
static void *run(void *arg) { *(int *)arg = add(*(int *)arg, 1); return NULL; }
int main(void) {
	pthread_t t;
	int n = 41;
	pthread_create(&t, NULL, run, &n);
	pthread_join(t, NULL);
	printf("%s %d\n", greet(), n);
	return 0;
}
C
cat > Makefile <<'MK'
CFLAGS = -O2 -Wall -Werror -Iinclude -fPIC -MMD
build/%.o: src/%.c
	$(CC) $(CFLAGS) -c -o $@ $<
build/libadd.a: build/add.o
	$(AR) rcs $@ $^
build/libgreet.so: build/greet.o
	$(CC) -shared -o $@ $^
build/app: build/main.o build/libadd.a build/libgreet.so
	$(CC) -o $@ build/main.o -Lbuild -Wl,-rpath,'$$ORIGIN' -lgreet -ladd -pthread
-include build/*.d
MK
make -j4 build/app
test "$(build/app)" = "hello 42"
# Only what depends on the header is rebuilt.
sed -i 's/"hello"/"hi"/' include/greet.h
out=$(make -j4 build/app)
printf '%s\n' "$out" | grep -q 'greet.o'
test "$(build/app)" = "hi 42"
test "$(make build/app)" = "make: 'build/app' is up to date."

/* Calls one function of a jitflow CPU library through the TVM FFI C ABI, without libtvm.
 *
 *   ffi_driver LIB.so SYMBOL SHAPE:FILE [SHAPE:FILE ...]
 *
 * Each argument is a float32 tensor: SHAPE is its dimensions joined by 'x' ("64" or "32x16"), FILE
 * holds its elements (little-endian float32, row-major). The driver dlopens LIB.so, builds one
 * DLTensor per argument, calls SYMBOL (a TVMFFISafeCallType such as __tvm_ffi_main) with them as
 * TVMFFIAny values of type kTVMFFIDLTensorPtr, then writes every tensor back to its FILE.
 * Exit status: 0 on success, 2 when the function reports an error (printed on stderr), 1 on misuse.
 *
 * The library's calls into the TVM runtime resolve to the definitions below: the executable
 * exports them (link it with -rdynamic, -lpthread), so the library loads without libtvm. Parallel
 * launches run on DRIVER_TASKS threads (the caller is task 0), with a barrier for their group.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/ffi/c_api.h>

#define MAX_ARGS 16
#define MAX_DIMS 6
#define DRIVER_TASKS 3

static char last_error[4096];

void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** parts, int32_t num_parts) {
  size_t used = (size_t)snprintf(last_error, sizeof(last_error), "%s: ", kind);
  for (int32_t i = 0; i < num_parts && used < sizeof(last_error); ++i) {
    used += (size_t)snprintf(last_error + used, sizeof(last_error) - used, "%s", parts[i]);
  }
}

void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message) {
  TVMFFIErrorSetRaisedFromCStrParts(kind, &message, 1);
}

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int code_hint,
                               int bits_hint) {
  (void)device_type, (void)device_id, (void)code_hint, (void)bits_hint;
  void* ptr = NULL;
  return posix_memalign(&ptr, 64, nbytes ? nbytes : 1) == 0 ? ptr : NULL;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type, (void)device_id;
  free(ptr);
  return 0;
}

/* TVM's parallel launch ABI (tvm/runtime/c_backend_api.h) */
typedef struct {
  void* sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv;
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

typedef struct {
  FTVMParallelLambda flambda;
  TVMParallelGroupEnv* env;
  void* cdata;
  int task_id;
  int status;
} Task;

static void* run_task(void* arg) {
  Task* task = (Task*)arg;
  task->status = task->flambda(task->task_id, task->env, task->cdata);
  return NULL;
}

int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  pthread_barrier_t barrier;
  TVMParallelGroupEnv env;
  Task tasks[DRIVER_TASKS];
  pthread_t threads[DRIVER_TASKS];
  int n = num_task > 0 && num_task < DRIVER_TASKS ? num_task : DRIVER_TASKS, failed = 0;
  pthread_barrier_init(&barrier, NULL, (unsigned)n);
  env.sync_handle = &barrier;
  env.num_task = n;
  for (int i = 0; i < n; ++i) {
    tasks[i] = (Task){flambda, &env, cdata, i, 0};
    if (i > 0) pthread_create(&threads[i], NULL, run_task, &tasks[i]);
  }
  run_task(&tasks[0]);
  for (int i = 0; i < n; ++i) {
    if (i > 0) pthread_join(threads[i], NULL);
    failed |= tasks[i].status != 0;
  }
  pthread_barrier_destroy(&barrier);
  return failed ? -1 : 0;
}

int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  (void)task_id;
  pthread_barrier_wait((pthread_barrier_t*)penv->sync_handle);
  return 0;
}

/* the per-thread slots of TVM FFI's stream table, which the library's launches mark their tasks in */
static __thread void* streams[16][2];

int TVMFFIEnvSetStream(int32_t device_type, int32_t device_id, void* stream, void** out_original) {
  if (device_type < 0 || device_type >= 16 || device_id < 0 || device_id >= 2) return -1;
  if (out_original != NULL) *out_original = streams[device_type][device_id];
  streams[device_type][device_id] = stream;
  return 0;
}

void* TVMFFIEnvGetStream(int32_t device_type, int32_t device_id) {
  if (device_type < 0 || device_type >= 16 || device_id < 0 || device_id >= 2) return NULL;
  return streams[device_type][device_id];
}

/* errors are the message in last_error: there are no error objects to move between threads */
void TVMFFIErrorMoveFromRaised(TVMFFIObjectHandle* result) { *result = NULL; }
void TVMFFIErrorSetRaised(TVMFFIObjectHandle error) { (void)error; }
int TVMFFIObjectDecRef(TVMFFIObjectHandle obj) {
  (void)obj;
  return 0;
}

typedef struct {
  const char* path;
  int64_t shape[MAX_DIMS];
  DLTensor tensor;
  size_t count;
} Arg;

static int parse_arg(const char* text, Arg* arg) {
  const char* colon = strchr(text, ':');
  if (colon == NULL) return -1;
  arg->path = colon + 1;
  arg->count = 1;
  int ndim = 0;
  const char* p = text;
  while (p < colon) {
    char* end;
    long long dim = strtoll(p, &end, 10);
    if (end == p || dim <= 0 || ndim == MAX_DIMS) return -1;
    arg->shape[ndim++] = dim;
    arg->count *= (size_t)dim;
    p = (*end == 'x') ? end + 1 : end;
    if (end != colon && *end != 'x') return -1;
  }
  float* data = NULL;
  if (ndim == 0 || posix_memalign((void**)&data, 64, arg->count * sizeof(float)) != 0) return -1;
  FILE* f = fopen(arg->path, "rb");
  if (f == NULL) return -1;
  size_t got = fread(data, sizeof(float), arg->count, f);
  fclose(f);
  if (got != arg->count) return -1;
  DLTensor t = {0};
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = arg->shape;
  t.strides = NULL;
  t.byte_offset = 0;
  arg->tensor = t;
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4 || argc - 3 > MAX_ARGS) {
    fprintf(stderr, "usage: %s LIB.so SYMBOL SHAPE:FILE [SHAPE:FILE ...]\n", argv[0]);
    return 1;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  TVMFFISafeCallType func = (TVMFFISafeCallType)dlsym(lib, argv[2]);
  if (func == NULL) {
    fprintf(stderr, "dlsym: %s\n", dlerror());
    return 1;
  }
  int num_args = argc - 3;
  Arg args[MAX_ARGS];
  TVMFFIAny packed[MAX_ARGS];
  for (int i = 0; i < num_args; ++i) {
    if (parse_arg(argv[3 + i], &args[i]) != 0) {
      fprintf(stderr, "bad tensor argument (SHAPE:FILE, float32 data): %s\n", argv[3 + i]);
      return 1;
    }
    memset(&packed[i], 0, sizeof(TVMFFIAny));
    packed[i].type_index = kTVMFFIDLTensorPtr;
    packed[i].v_ptr = &args[i].tensor;
  }
  TVMFFIAny result;
  memset(&result, 0, sizeof(result));
  result.type_index = kTVMFFINone;
  if (func(NULL, packed, num_args, &result) != 0) {
    fprintf(stderr, "%s\n", last_error);
    return 2;
  }
  for (int i = 0; i < num_args; ++i) {
    FILE* f = fopen(args[i].path, "wb");
    if (f == NULL || fwrite(args[i].tensor.data, sizeof(float), args[i].count, f) != args[i].count) {
      fprintf(stderr, "cannot write %s\n", args[i].path);
      return 1;
    }
    fclose(f);
  }
  printf("ok %d\n", num_args);
  return 0;
}
